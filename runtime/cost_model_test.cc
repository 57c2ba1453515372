// The cost model: cache keys, weight-only nodes, the timing cache file,
// measurement reuse and the end-to-end interleaved timing.
#include "runtime/cost_model.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "core/error.h"
#include "core/file_util.h"
#include "core/graph_builder.h"

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

TEST(CostModel, KeysDependOnOpAttributesAndShapesOnly) {
  Graph g = Small();
  NodeId c0 = Find(g, "Conv", 0), c1 = Find(g, "Conv", 1);
  // Same op, attributes and input types (different weights): same key.
  EXPECT_EQ(NodeCostKey(g, c0), NodeCostKey(g, c1));
  EXPECT_EQ(NodeCostHash(g, c0), NodeCostHash(g, c1));
  Graph wider = Small(16);
  EXPECT_NE(NodeCostKey(g, c0), NodeCostKey(wider, Find(wider, "Conv")));
  EXPECT_NE(NodeCostHash(g, c0), NodeCostHash(wider, Find(wider, "Conv")));
  Graph other = g;
  other.mutable_node(c0).attrs["strides"] = Attribute::Ints({2, 2});
  EXPECT_NE(NodeCostKey(g, c0), NodeCostKey(other, c0));
  EXPECT_NE(NodeCostHash(g, c0), NodeCostHash(other, c0));
}

// One conv built three ways (only pads; every attribute explicit; auto_pad):
// one key, and the cost model times it once.
TEST(CostModel, KeysUseEffectiveAttributes) {
  GraphBuilder b(3);
  ValueId x = b.Input("x", {1, 4, 16, 16});
  ValueId w = b.Weight("w", {8, 4, 3, 3}, 0.1f);
  ValueId c1 = b.Op("Conv", {x, w}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  ValueId c2 = b.Op("Conv", {x, w},
                    {{"pads", Attribute::Ints({1, 1, 1, 1})}, {"strides", Attribute::Ints({1, 1})},
                     {"dilations", Attribute::Ints({1, 1})}, {"kernel_shape", Attribute::Ints({3, 3})},
                     {"group", Attribute::Int(1)}, {"auto_pad", Attribute::String("NOTSET")}});
  ValueId c3 = b.Op("Conv", {x, w}, {{"auto_pad", Attribute::String("SAME_UPPER")}});
  ValueId other = b.Op("Conv", {x, w}, {{"pads", Attribute::Ints({1, 1, 1, 1})}, {"strides", Attribute::Ints({2, 2})}});
  Graph g = b.Build({c1, c2, c3, other});
  NodeId n1 = Find(g, "Conv", 0), n2 = Find(g, "Conv", 1), n3 = Find(g, "Conv", 2), n4 = Find(g, "Conv", 3);
  EXPECT_EQ(NodeCostKey(g, n1), NodeCostKey(g, n2));
  EXPECT_EQ(NodeCostKey(g, n1), NodeCostKey(g, n3));
  EXPECT_NE(NodeCostKey(g, n1), NodeCostKey(g, n4));
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

  // A missing file is an empty cache; malformed ones are errors naming the file.
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
  EXPECT_THROW(fresh.LoadCache(path), Error);
}

TEST(CostModel, InterleavedTimingAndBackends) {
  auto backend = MakeTimingBackend("cpu");
  EXPECT_EQ(backend->name(), "cpu");
  EXPECT_NE(backend->fingerprint().find("cpu/t"), std::string::npos);
  Graph small = Small(4), big = Small(64);
  TimingOptions o;
  auto [a, b] = backend->TimeInterleaved(small, big, 5, o);
  EXPECT_GT(a, 0);
  EXPECT_GT(b, a);  // 16x the conv work
  EXPECT_THROW(MakeTimingBackend("tpu"), Error);
  EXPECT_THROW(MakeTimingBackend("cuda"), Error);  // no CUDA backend in this build
}

TEST(CostModel, ExtractNodeKeepsConstantInputs) {
  Graph g = Small();
  Graph single = ExtractNode(g, Find(g, "Add"));
  EXPECT_EQ(single.num_nodes(), 1);
  EXPECT_EQ(single.inputs().size(), 2u);  // the conv output and the (computed) scaled bias
  EXPECT_NE(NodeCostKey(g, Find(g, "Add")).find("float32[8,1,1]"), std::string::npos);
  Graph conv0 = ExtractNode(g, Find(g, "Conv", 0));
  EXPECT_EQ(conv0.inputs().size(), 1u);   // x; the weight stays an initializer
  EXPECT_EQ(conv0.initializers().size(), 1u);
}

}  // namespace
}  // namespace rlflow

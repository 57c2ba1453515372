#include "optimiser/picture.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.h"
#include "core/file_util.h"
#include "core/graph_builder.h"
#include "core/subprocess.h"

namespace rlflow {
namespace {

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// before: x -> Relu -> Conv(w) -> Add(b) -> Sigmoid;  after: the Add folded
// away (Conv with bias), the Relu and the Sigmoid unchanged.
struct Pair {
  Graph before, after;
  Pair() {
    {
      GraphBuilder g(1);
      ValueId x = g.Input("x", {1, 4, 8, 8});
      ValueId r = g.Op("Relu", {x});
      ValueId c = g.Op("Conv", {r, g.Weight("w", {4, 4, 1, 1}, 0.1f)});
      ValueId a = g.Op("Add", {c, g.Weight("b", {1, 4, 1, 1}, 0.1f)});
      before = g.Build({g.Op("Sigmoid", {a})});
      before.RenameValue(before.outputs()[0], "y");  // outputs keep their names, as in every rewrite
    }
    {
      GraphBuilder g(1);
      ValueId x = g.Input("x", {1, 4, 8, 8});
      ValueId r = g.Op("Relu", {x});
      ValueId c = g.Op("Conv", {r, g.Weight("w", {4, 4, 1, 1}, 0.1f), g.Weight("folded_b", {4}, 0.1f)});
      after = g.Build({g.Op("Sigmoid", {c})});
      after.RenameValue(after.outputs()[0], "y");
    }
  }
};

TEST(Picture, DrawsOnlyTheRewrittenRegionsWithTheirNeighbours) {
  Pair p;
  std::string dot = RewritePictureDot(p.before, p.after, {"0123abcd x1"});
  // Before: Conv and Add rewritten (red); after: the new Conv (green).
  EXPECT_EQ(Count(dot, "#f4b6b6"), 2) << dot;
  EXPECT_EQ(Count(dot, "#b6e3b6"), 1) << dot;
  EXPECT_NE(dot.find("(2 nodes rewritten)"), std::string::npos) << dot;
  EXPECT_NE(dot.find("(1 node rewritten)"), std::string::npos) << dot;
  // The unchanged Relu and Sigmoid appear as grey context on both sides.
  EXPECT_EQ(Count(dot, "fillcolor=\"#eeeeee\""), 4) << dot;
  EXPECT_NE(dot.find("0123abcd x1"), std::string::npos);
}

TEST(Picture, UnchangedGraphHasNoRegion) {
  Pair p;
  std::string dot = RewritePictureDot(p.before, p.before, {});
  EXPECT_EQ(Count(dot, "#f4b6b6"), 0);
  EXPECT_EQ(Count(dot, "#b6e3b6"), 0);
  EXPECT_NE(dot.find("(0 nodes rewritten)"), std::string::npos);
  EXPECT_NE(dot.find("none"), std::string::npos);
}

TEST(Picture, CapsTheNodesDrawn) {
  Pair p;
  PictureOptions o;
  o.max_nodes = 1;
  std::string dot = RewritePictureDot(p.before, p.after, {}, o);
  EXPECT_EQ(Count(dot, "#f4b6b6"), 1);
  EXPECT_NE(dot.find("first 1 drawn"), std::string::npos);
  o.max_nodes = 0;
  EXPECT_THROW(RewritePictureDot(p.before, p.after, {}, o), Error);
}

TEST(Picture, WritesAPng) {
  if (!HaveProgram("dot", "-V")) GTEST_SKIP() << "Graphviz's dot is not installed";
  Pair p;
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/picture.png";
  WritePng(RewritePictureDot(p.before, p.after, {"r x1"}), path);
  const std::string png = ReadFile(path);
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  EXPECT_THROW(WritePng("digraph { this is not dot", path + ".bad.png"), Error);
  EXPECT_FALSE(FileExists(path + ".bad.png"));
}

}  // namespace
}  // namespace rlflow

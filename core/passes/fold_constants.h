#pragma once
// Constant folding.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/graph.h"

namespace rlflow {

struct FoldOptions {
  // Fold a node only if every constant input and every output has at most
  // this many elements (shape arithmetic, not weights). Constant nodes and
  // Shape nodes with a static input are always folded. Use a large value to
  // fold weight-only subgraphs too.
  int64_t max_elements = 4096;
  // Folding never materialises much more data than it consumes: a node whose
  // outputs are over `max_growth_bytes` and over `max_growth_ratio` times its
  // constant inputs stays a node (a ConstantOfShape to [40000, 40000] would
  // add 6.4 GB to the model; onnx-simplifier has the same bound). Weights
  // transformed in place (scaled, transposed, concatenated, a kernel padded
  // from 1x1 to 3x3: 9x) still fold.
  int64_t max_growth_bytes = int64_t{16} << 20;
  double max_growth_ratio = 16.0;
  // Names of values that depend on symbolic input dimensions (found by the
  // importer): they, and every value marked Value::symbolic, are computed at
  // run time and never folded; their value at the bound dimensions is kept
  // in Value::known for the shape rules.
  const std::set<std::string>* symbolic = nullptr;
  // Names of values computed from symbolic ones that are static all the same
  // (found by the importer: a dimension of a tensor whose other dimensions
  // are symbolic, Gather(Shape(h), 2) where h is [N, S, 128]): folded into
  // constants from their known values.
  const std::set<std::string>* static_values = nullptr;
  // Receives a line for each node turned opaque because the registry cannot
  // run it as configured (rlflow::Unsupported from its shape rule).
  std::vector<std::string>* notes = nullptr;
  // Receives a line for each declared output type whose shape contradicts
  // the inferred one, which then replaces it (the model's value_info or
  // output declarations are stale; see InferAndSetNodeShapes). Null: such a
  // declaration is an error.
  std::vector<std::string>* stale_shapes = nullptr;
  // Remove the nodes (and values) that folding made dead.
  bool remove_dead = true;
  // Per node id: nodes never computed into constants, whatever their inputs
  // (WeightGrowingNodes: the model's weights stay as it stores them).
  const std::vector<char>* keep = nullptr;
};

// Nodes computed from weights only (every input a weight or computed from
// weights only; opaque nodes never): folded before a graph is written, and
// what every ONNX runtime folds at load. Per node id.
std::vector<char> WeightOnlyNodes(const Graph& graph);

// How much more weight data folding may store than the model holds.
struct WeightGrowthBound {
  // A weight-only subgraph grows the model where the tensor it computes is
  // over `ratio` times the weights it reads and over `region_bytes` more
  // than them. Growing subgraphs stay as nodes where, together, they would
  // store over `bytes` more.
  double ratio = 1.25;
  int64_t region_bytes = int64_t{16} << 10;
  int64_t bytes = int64_t{1} << 20;
};

// The model's own weight-only nodes whose folding would make it store more
// weight data than it does: a Cast of float16 weights to float32 (2x), an
// Expand or Tile of a weight, a ConstantOfShape. Each tensor that a
// weight-only subgraph of imported nodes (Node::source_proto; none a
// rewrite made) hands to the rest of the graph is compared with the weights
// its subgraph reads (a weight read by several such subgraphs counted once,
// shared between them; one the rest of the graph reads too not at all: it
// stays stored either way). Where the tensors are larger by the bound,
// their subgraphs' nodes are kept, but for those another folded subgraph
// needs. Folding them gains nothing where the model runs (ONNX Runtime
// folds them at load) and would undo the size the user chose
// (onnx-simplifier's "--no-large-tensor" for Tile and ConstantOfShape).
// Weights a rewrite computes (a 1x1 kernel padded to 3x3 and merged) fold:
// the search costed them folded. Per node id.
std::vector<char> WeightGrowingNodes(const Graph& graph, const WeightGrowthBound& bound = {});

// One pass in topological order that infers each modelled node's output
// types (as InferShapes does) and replaces foldable nodes' outputs by
// initializers, so that shapes computed by folded subgraphs (Shape -> Gather
// -> Concat -> Reshape) are known to the nodes after them. Removes the dead
// nodes. Returns the number of nodes folded. Opaque nodes are never folded.
// An imported node whose shape rule says the registry cannot run it
// (rlflow::Unsupported) becomes opaque.
int InferShapesAndFold(Graph& graph, const FoldOptions& options = {});

}  // namespace rlflow

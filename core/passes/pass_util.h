#pragma once
// Helpers shared by the passes in core/passes (not a public API).
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/op_registry.h"
#include "core/passes/pass.h"

namespace rlflow::passes {

// A modelled node of the default domain with operator `op`.
bool Is(const Node& n, const char* op);
// Reads of `v` by nodes plus 1 if it is a graph output.
int Uses(const Graph& g, ValueId v);
bool IsGraphOutput(const Graph& g, ValueId v);
// Some output of the node is read.
bool Live(const Graph& g, NodeId id);
// Attribute reader with the registry's defaults (the node must be modelled).
AttrReader Attrs(const Graph& g, NodeId id);
// A string equal for equal attribute maps.
std::string AttrKey(const AttributeMap& attrs);

// Replaces `from` (an output of a node the pass removes) by `to`. If `from`
// is a graph output, `to` takes over its name; refused (false, nothing
// changed) where `to` cannot be renamed (a graph input, an initializer or
// another graph output) or the types differ.
bool Forward(Graph& g, ValueId from, ValueId to);

// Adds a node, infers its output types; returns the node.
NodeId AddNode(Graph& g, std::string op, const std::vector<ValueId>& inputs, int num_outputs, AttributeMap attrs,
               const std::string& base);

// A constant's contents as an ATen tensor (a view), or undefined if `v` is
// not a constant.
at::Tensor Constant(const Graph& g, ValueId v);
// Adds an initializer holding `t` (copied); returns its value.
ValueId AddConstant(Graph& g, const std::string& base, const at::Tensor& t);
// True if `v` is a constant whose every element equals `x`.
bool ConstantAll(const Graph& g, ValueId v, double x);
// `v` as a per-channel vector [C] for a tensor of rank `rank` with C
// channels on axis 1 (shape after broadcasting: 1 everywhere but possibly
// axis 1; a scalar broadcasts to every channel), float32 (float64 for a
// float64 constant); undefined if not a floating-point constant.
at::Tensor PerChannel(const Graph& g, ValueId v, int64_t rank, int64_t channels);
// A constant 1-D int64 tensor's values; nullopt if not constant.
std::optional<std::vector<int64_t>> ConstInts(const Graph& g, ValueId v);

// A pass that visits the live modelled nodes in topological order and
// tries a local rewrite at each; sweeps repeat (at most MaxSweeps) until one
// changes nothing, with dead nodes dropped after each sweep.
class LocalPass : public Pass {
 public:
  bool Run(Graph& g) const override;
  // Rewrites at node `id` (live, modelled); returns true if it changed the graph.
  virtual bool Rewrite(Graph& g, NodeId id) const = 0;
  // The most sweeps Run makes (a rewrite that moves a node one step a
  // sweep needs as many as the graph is deep).
  virtual int MaxSweeps(const Graph&) const { return 16; }
};

}  // namespace rlflow::passes

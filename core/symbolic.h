#pragma once
// Symbolic tensors for the verifier: every element is a Z3 real expression.
// Op entries define their symbolic semantics on these (OpDef::symbolic).
#include <z3++.h>

#include <functional>
#include <string>
#include <vector>

#include "core/op_registry.h"
#include "core/tensor.h"

namespace rlflow {

struct SymTensor {
  Shape shape;
  std::vector<z3::expr> v;  // row-major
  bool defined() const { return !v.empty() || NumElements(shape) == 0; }
  int64_t numel() const { return NumElements(shape); }
  const z3::expr& at(const std::vector<int64_t>& index) const;
};

struct SymbolicContext : public AttrReader {
  SymbolicContext(const Node& node, const OpDef& def, z3::context& z3, std::vector<SymTensor> in,
                  std::vector<const TensorData*> constants)
      : AttrReader(node, def), z3(z3), inputs(std::move(in)), constants(std::move(constants)) {}
  bool has(int i) const { return i < static_cast<int>(inputs.size()) && inputs[i].defined(); }
  const SymTensor& in(int i) const;
  // Values of a constant integer input (pads, shapes, axes).
  std::vector<int64_t> ConstInts(int i) const;
  int num_outputs() const { return static_cast<int>(node().outputs.size()); }
  z3::expr Real(double v) const;

  z3::context& z3;
  std::vector<SymTensor> inputs;
  std::vector<const TensorData*> constants;
  std::vector<SymTensor> outputs;
};

// Row-major strides and multi-index helpers.
std::vector<int64_t> Strides(const Shape& shape);
std::vector<int64_t> Unravel(int64_t flat, const Shape& shape);
// Element-wise op with numpy broadcasting.
SymTensor SymBroadcast(const SymbolicContext& c, const SymTensor& a, const SymTensor& b,
                       z3::expr (*f)(const z3::expr&, const z3::expr&));
// The exact rational value of a finite double, as a Z3 numeral.
z3::expr ExactReal(z3::context& z3, double v);
// A tensor of fresh real variables named <prefix>[i,j,...].
SymTensor SymVariables(z3::context& z3, const std::string& prefix, const Shape& shape);
// A constant tensor from data (floating or integer).
SymTensor SymConstant(z3::context& z3, const TensorData& data);
// Data movement: out[i] = in[index_map(i)] (a gather by flat index).
SymTensor SymGather(const SymTensor& in, const Shape& out_shape, const std::vector<int64_t>& flat_source);

// f(args) for an uninterpreted real function `name` of the context (the
// same declaration for every use of the name in one Z3 context).
z3::expr SymApply(z3::context& z3, const std::string& name, const std::vector<z3::expr>& args);
// Reduces `x` over `axes` (normalised, any order) with `combine` per output
// element (the reduced elements in row-major order); keepdims keeps 1s.
SymTensor SymReduce(const SymTensor& x, const std::vector<int64_t>& axes, bool keepdims,
                    const std::function<z3::expr(const std::vector<z3::expr>&)>& combine);

// Runs `def`'s symbolic semantics for `node`; errors name the node.
std::vector<SymTensor> RunSymbolic(const Node& node, const OpDef& def, z3::context& z3, std::vector<SymTensor> inputs,
                                   std::vector<const TensorData*> constants);

}  // namespace rlflow

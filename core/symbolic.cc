#include "core/symbolic.h"

#include <sstream>

#include "core/error.h"

namespace rlflow {

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) s[k - 1] = s[k] * shape[k];
  return s;
}

std::vector<int64_t> Unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    idx[k] = flat % shape[k];
    flat /= shape[k];
  }
  return idx;
}

const z3::expr& SymTensor::at(const std::vector<int64_t>& index) const {
  int64_t flat = 0;
  for (size_t k = 0; k < shape.size(); ++k) flat = flat * shape[k] + index[k];
  return v.at(flat);
}

const SymTensor& SymbolicContext::in(int i) const {
  if (!has(i)) Fail("input " + std::to_string(i) + " is missing");
  return inputs[i];
}

std::vector<int64_t> SymbolicContext::ConstInts(int i) const {
  if (i >= static_cast<int>(constants.size()) || constants[i] == nullptr)
    Fail("input " + std::to_string(i) + " must be a constant for symbolic evaluation");
  return constants[i]->ToInt64();
}

z3::expr SymbolicContext::Real(double v) const {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return z3.real_val(os.str().c_str());
}

SymTensor SymBroadcast(const SymbolicContext& c, const SymTensor& a, const SymTensor& b,
                       z3::expr (*f)(const z3::expr&, const z3::expr&)) {
  SymTensor out;
  out.shape = BroadcastShapes(a.shape, b.shape, c);
  const size_t r = out.shape.size();
  auto source = [&](const SymTensor& t, const std::vector<int64_t>& idx) {
    int64_t flat = 0;
    size_t off = r - t.shape.size();
    for (size_t k = 0; k < t.shape.size(); ++k) flat = flat * t.shape[k] + (t.shape[k] == 1 ? 0 : idx[off + k]);
    return t.v[flat];
  };
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = Unravel(i, out.shape);
    out.v.push_back(f(source(a, idx), source(b, idx)));
  }
  return out;
}

SymTensor SymVariables(z3::context& z3, const std::string& prefix, const Shape& shape) {
  SymTensor t;
  t.shape = shape;
  for (int64_t i = 0; i < t.numel(); ++i) {
    std::ostringstream os;
    os << prefix << "[";
    std::vector<int64_t> idx = Unravel(i, shape);
    for (size_t k = 0; k < idx.size(); ++k) os << (k ? "," : "") << idx[k];
    os << "]";
    t.v.push_back(z3.real_const(os.str().c_str()));
  }
  return t;
}

SymTensor SymConstant(z3::context& z3, const TensorData& data) {
  SymTensor t;
  t.shape = data.shape();
  for (double d : data.ToDouble()) {
    std::ostringstream os;
    os.precision(17);
    os << d;
    t.v.push_back(z3.real_val(os.str().c_str()));
  }
  return t;
}

SymTensor SymGather(const SymTensor& in, const Shape& out_shape, const std::vector<int64_t>& flat_source) {
  SymTensor out;
  out.shape = out_shape;
  for (int64_t s : flat_source) out.v.push_back(in.v.at(s));
  return out;
}

std::vector<SymTensor> RunSymbolic(const Node& node, const OpDef& def, z3::context& z3, std::vector<SymTensor> inputs,
                                   std::vector<const TensorData*> constants) {
  if (def.symbolic == nullptr) Fail("node ", node.Describe(), ": operator has no symbolic semantics");
  SymbolicContext ctx(node, def, z3, std::move(inputs), std::move(constants));
  try {
    def.symbolic(ctx);
  } catch (const z3::exception& e) {
    Fail("node ", node.Describe(), ": Z3 error: ", e.msg());
  }
  if (ctx.outputs.size() < node.outputs.size())
    Fail("node ", node.Describe(), ": symbolic semantics gave ", ctx.outputs.size(), " outputs");
  return std::move(ctx.outputs);
}

}  // namespace rlflow

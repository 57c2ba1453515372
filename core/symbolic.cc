#include "core/symbolic.h"

#include <cmath>
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

z3::expr SymApply(z3::context& z3, const std::string& name, const std::vector<z3::expr>& args) {
  z3::sort_vector domain(z3);
  z3::expr_vector values(z3);
  for (const z3::expr& a : args) {
    domain.push_back(z3.real_sort());
    values.push_back(a);
  }
  return z3.function(name.c_str(), domain, z3.real_sort())(values);
}

SymTensor SymReduce(const SymTensor& x, const std::vector<int64_t>& axes, bool keepdims,
                    const std::function<z3::expr(const std::vector<z3::expr>&)>& combine) {
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<char> reduced(static_cast<size_t>(rank), 0);
  for (int64_t a : axes) reduced[static_cast<size_t>(a)] = 1;
  Shape kept, out_shape;
  for (int64_t k = 0; k < rank; ++k) {
    if (!reduced[k]) kept.push_back(x.shape[k]);
    if (!reduced[k])
      out_shape.push_back(x.shape[k]);
    else if (keepdims)
      out_shape.push_back(1);
  }
  std::vector<std::vector<z3::expr>> groups(static_cast<size_t>(NumElements(kept)));
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> idx = Unravel(i, x.shape);
    int64_t g = 0;
    for (int64_t k = 0; k < rank; ++k)
      if (!reduced[k]) g = g * x.shape[k] + idx[k];
    groups[static_cast<size_t>(g)].push_back(x.v[static_cast<size_t>(i)]);
  }
  SymTensor out;
  out.shape = out_shape;
  for (const auto& g : groups) out.v.push_back(combine(g));
  return out;
}

z3::expr ExactReal(z3::context& z3, double v) {
  if (!std::isfinite(v)) Fail("a non-finite constant (", v, ") has no symbolic value");
  if (v == 0) return z3.real_val(0);
  // v = mantissa * 2^exponent exactly, the mantissa a 53-bit integer.
  int exponent = 0;
  const double m = std::frexp(v, &exponent);
  int64_t mantissa = static_cast<int64_t>(std::ldexp(m, 53));
  exponent -= 53;
  while (mantissa % 2 == 0 && exponent < 0) {
    mantissa /= 2;
    ++exponent;
  }
  // As "p/q" text in decimal digits (not "1e-05", which Z3 reads as 1/0).
  auto twice = [](std::string& digits) {
    int carry = 0;
    for (size_t i = digits.size(); i-- > 0;) {
      const int d = (digits[i] - '0') * 2 + carry;
      digits[i] = static_cast<char>('0' + d % 10);
      carry = d / 10;
    }
    if (carry) digits.insert(digits.begin(), static_cast<char>('0' + carry));
  };
  std::string numerator = std::to_string(mantissa < 0 ? -mantissa : mantissa), denominator = "1";
  for (int k = 0; k < std::abs(exponent); ++k) twice(exponent > 0 ? numerator : denominator);
  return z3.real_val(((mantissa < 0 ? "-" : "") + numerator + "/" + denominator).c_str());
}

z3::expr SymbolicContext::Real(double v) const { return ExactReal(z3, v); }

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
  for (double d : data.ToDouble()) t.v.push_back(ExactReal(z3, d));
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

#include "generator/enumerate.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "core/op_registry.h"
#include "core/ops/kernel.h"
#include "core/parallel.h"

namespace rlflow::generator {
namespace {

using Dims = std::vector<rules::Dim>;

// ---- the universe: typed inputs with symbolic shapes ----
struct Symbol {
  const char* name;
  int64_t fingerprint_value;
};
// Distinct values keep different symbols from coinciding in fingerprints.
const Symbol kSymbols[] = {{"n", 2}, {"c", 3}, {"d", 4}, {"h", 5}, {"w", 6}, {"m", 7}, {"k", 8}, {"j", 9}, {"l", 10}};

rules::TensorVar Var(const std::string& name, std::vector<rules::Dim> shape) {
  rules::TensorVar v;
  v.set_name(name);
  v.set_dtype(static_cast<int32_t>(DType::kFloat32));
  for (auto& d : shape) *v.add_shape() = d;
  return v;
}

std::vector<rules::TensorVar> Universe() {
  auto S = DimSymbol;
  auto K = DimConst;
  return {
      Var("X1", {S("n"), S("c"), S("h"), S("w")}),  // activations
      Var("X2", {S("n"), S("c"), S("h"), S("w")}),
      Var("W1", {S("d"), S("c"), K(3), K(3)}),  // conv weights
      Var("W2", {S("d"), S("c"), K(3), K(3)}),
      Var("W3", {S("d"), S("c"), K(1), K(1)}),
      Var("W4", {S("d"), S("c"), K(1), K(3)}),
      Var("S1", {S("d"), K(1), K(1)}),  // per-channel scale / shift (batch norm, inference form)
      Var("S2", {S("d"), K(1), K(1)}),
      Var("B1", {S("d")}),          // conv bias
      Var("A1", {S("m"), S("k")}),  // matrices
      Var("A2", {S("m"), S("k")}),
      Var("M1", {S("k"), S("j")}),
      Var("M2", {S("k"), S("j")}),
      Var("C1", {S("j"), S("l")}),
      Var("s", {}),  // scalar
      // Transformer layers: sequence activations [batch, tokens, features],
      // projection weights of two widths, last-axis biases, and a projection
      // of the two widths together (j + l features, as after a merge).
      Var("T1", {S("n"), S("m"), S("k")}),
      Var("M3", {S("k"), S("l")}),
      Var("V1", {S("j")}),
      Var("V3", {S("l")}),
      Var("Y1", {S("n"), S("m"), DimAdd(S("j"), S("l"))}),
      // Attention: per-head keys [batch, heads, features, tokens] for a
      // batched product with X1 read as per-head queries [n, c, h, w].
      Var("K4", {S("n"), S("c"), S("w"), S("j")}),
      // A multi-head projection's output [batch, tokens, heads * head_dim],
      // reshaped into heads.
      Var("T4", {S("n"), S("m"), DimProduct("c", "w")}),
      // A bias of T1's features.
      Var("V2", {S("k")}),
  };
}

// ---- operator templates ----
struct Applied {
  std::vector<Dims> outputs;
  std::vector<rules::Constant> constants;  // extra constant operands, after the variables
  AttributeMap attrs;
};

struct Template {
  std::string name;  // for settings / logs
  std::string op;
  int arity = 1;
  std::function<bool(const std::vector<const Dims*>&, Applied*)> apply;
  bool commutative = false;  // from the op registry: only one operand order is enumerated
};

rules::Constant IntsConst(std::vector<int64_t> v) {
  rules::Constant c;
  c.set_dtype(static_cast<int32_t>(DType::kInt64));
  c.add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) c.add_int_values(x);
  return c;
}

// An int64 vector of dimension expressions (e.g. Split sizes [j, l]).
rules::Constant DimsConst(const std::vector<rules::Dim>& v) {
  rules::Constant c;
  c.set_dtype(static_cast<int32_t>(DType::kInt64));
  c.add_dims(static_cast<int64_t>(v.size()));
  for (const auto& d : v) *c.add_dim_values() = d;
  return c;
}

// A dimension that is a sum of two parts (j + l -> j, l; 2j -> j, j).
bool SplitInTwo(const rules::Dim& d, rules::Dim* first, rules::Dim* rest) {
  if (d.constant() != 0 || d.terms_size() == 0) return false;
  if (d.terms_size() == 1 && d.terms(0).coeff() < 2) return false;
  *first = DimSymbol(d.terms(0).symbol());
  *rest = DimAdd(d, DimScale(*first, -1));
  return true;
}

bool HasProduct(const rules::Dim& d) {
  for (const auto& t : d.terms())
    if (IsProductSymbol(t.symbol())) return true;
  return false;
}

bool IsPerChannel(const Dims& s) {
  // [sym, 1, ..., 1] with at least one trailing 1.
  if (s.size() < 2) return false;
  for (size_t k = 1; k < s.size(); ++k)
    if (!DimIsConst(s[k], 1)) return false;
  return true;
}

// Broadcasting restricted to "a tensor op a scalar / per-channel tensor /
// last-axis vector (a bias)".
bool Broadcast(const Dims& a, const Dims& b, Dims* out) {
  auto same = [](const Dims& x, const Dims& y) {
    if (x.size() != y.size()) return false;
    for (size_t k = 0; k < x.size(); ++k)
      if (!DimEqual(x[k], y[k])) return false;
    return true;
  };
  if (same(a, b)) {
    *out = a;
    return true;
  }
  const Dims& big = a.size() >= b.size() ? a : b;
  const Dims& small = a.size() >= b.size() ? b : a;
  bool last_axis = small.size() == 1 && big.size() >= 2 && DimEqual(small[0], big.back());
  if (!small.empty() && !IsPerChannel(small) && !last_axis) return false;
  size_t off = big.size() - small.size();
  for (size_t k = 0; k < small.size(); ++k)
    if (!DimIsConst(small[k], 1) && !DimEqual(small[k], big[off + k])) return false;
  if (small.size() == big.size() && same(a, b)) return false;
  *out = big;
  return true;
}

bool IsKernelDim(const rules::Dim& d, int64_t* v) {
  if (d.terms_size() != 0) return false;
  *v = d.constant();
  return *v == 1 || *v == 3;
}

std::vector<Template> Templates() {
  std::vector<Template> t;
  t.push_back({"MatMul", "MatMul", 2, [](const std::vector<const Dims*>& in, Applied* out) {
                 const Dims &a = *in[0], &b = *in[1];
                 if (a.size() == 4 && b.size() == 4) {  // per-head products (attention)
                   if (!DimEqual(a[0], b[0]) || !DimEqual(a[1], b[1]) || !DimEqual(a[3], b[2])) return false;
                   out->outputs = {{a[0], a[1], a[2], b[3]}};
                   return true;
                 }
                 if (a.size() < 2 || b.size() != 2 || !DimEqual(a.back(), b[0])) return false;
                 if (a.size() == 2)
                   out->outputs = {{a[0], b[1]}};
                 else if (a.size() == 3)
                   out->outputs = {{a[0], a[1], b[1]}};  // a batch of sequences x weights
                 else
                   return false;
                 return true;
               }});
  // A + B C with a last-axis bias (ONNX Gemm, default attributes).
  t.push_back({"Gemm", "Gemm", 3, [](const std::vector<const Dims*>& in, Applied* out) {
                 const Dims &a = *in[0], &b = *in[1], &c = *in[2];
                 if (a.size() != 2 || b.size() != 2 || c.size() != 1 || !DimEqual(a[1], b[0]) || !DimEqual(c[0], b[1]))
                   return false;
                 out->outputs = {{a[0], b[1]}};
                 return true;
               }});
  // Division by a scalar (attention's 1/sqrt(d)): the divisor is the
  // universe's scalar, whose fingerprint value is a power of two.
  t.push_back({"Div", "Div", 2, [](const std::vector<const Dims*>& in, Applied* out) {
                 if (in[0]->empty() || !in[1]->empty()) return false;
                 out->outputs = {*in[0]};
                 return true;
               }});
  for (const char* op : {"Add", "Mul"}) {
    t.push_back({op, op, 2, [](const std::vector<const Dims*>& in, Applied* out) {
                   Dims o;
                   if (!Broadcast(*in[0], *in[1], &o)) return false;
                   out->outputs = {o};
                   return true;
                 }});
  }
  t.push_back({"Relu", "Relu", 1, [](const std::vector<const Dims*>& in, Applied* out) {
                 out->outputs = {*in[0]};
                 return true;
               }});
  auto conv = [](bool bias) {
    return [bias](const std::vector<const Dims*>& in, Applied* out) {
      const Dims &x = *in[0], &w = *in[1];
      int64_t kh, kw;
      if (x.size() != 4 || w.size() != 4 || !DimEqual(x[1], w[1]) || !IsKernelDim(w[2], &kh) || !IsKernelDim(w[3], &kw))
        return false;
      if (DimIsConst(x[2], 3) || DimIsConst(x[2], 1)) return false;  // x must be an activation
      if (bias && (in[2]->size() != 1 || !DimEqual((*in[2])[0], w[0]))) return false;
      out->attrs["pads"] = Attribute::Ints({kh / 2, kw / 2, kh / 2, kw / 2});
      out->outputs = {{x[0], w[0], x[2], x[3]}};
      return true;
    };
  };
  t.push_back({"Conv", "Conv", 2, conv(false)});
  t.push_back({"ConvBias", "Conv", 3, conv(true)});
  t.push_back({"Enlarge", "Pad", 1, [](const std::vector<const Dims*>& in, Applied* out) {
                 const Dims& w = *in[0];
                 int64_t kh, kw;
                 if (w.size() != 4 || !IsKernelDim(w[2], &kh) || !IsKernelDim(w[3], &kw) || kh != 1) return false;
                 // Zero-pad a 1x1 or 1x3 kernel to 3x3 (TASO's enlarge).
                 int64_t ph = 1, pw = kw == 1 ? 1 : 0;
                 out->constants = {IntsConst({0, 0, ph, pw, 0, 0, ph, pw})};
                 out->outputs = {{w[0], w[1], DimConst(3), DimConst(3)}};
                 return true;
               }});
  auto pool = [](bool avg) {
    return [avg](const std::vector<const Dims*>& in, Applied* out) {
      const Dims& x = *in[0];
      if (x.size() != 4 || x[2].terms_size() == 0 || x[3].terms_size() == 0) return false;
      out->attrs["kernel_shape"] = Attribute::Ints({3, 3});
      out->attrs["pads"] = Attribute::Ints({1, 1, 1, 1});
      if (avg) out->attrs["count_include_pad"] = Attribute::Int(1);
      out->outputs = {x};
      return true;
    };
  };
  t.push_back({"AveragePool", "AveragePool", 1, pool(true)});
  t.push_back({"MaxPool", "MaxPool", 1, pool(false)});
  for (int axis : {0, 1}) {
    t.push_back(
        {"Concat" + std::to_string(axis), "Concat", 2, [axis](const std::vector<const Dims*>& in, Applied* out) {
           const Dims &a = *in[0], &b = *in[1];
           if (a.size() != b.size() || static_cast<int>(a.size()) <= axis) return false;
           for (size_t k = 0; k < a.size(); ++k)
             if (static_cast<int>(k) != axis && !DimEqual(a[k], b[k])) return false;
           Dims o = a;
           o[axis] = DimAdd(a[axis], b[axis]);
           out->attrs["axis"] = Attribute::Int(axis);
           out->outputs = {o};
           return true;
         }});
    t.push_back({"Split" + std::to_string(axis), "Split", 1, [axis](const std::vector<const Dims*>& in, Applied* out) {
                   const Dims& a = *in[0];
                   if (static_cast<int>(a.size()) <= axis) return false;
                   auto half = DimHalf(a[axis]);
                   if (!half) return false;
                   Dims o = a;
                   o[axis] = *half;
                   out->attrs["axis"] = Attribute::Int(axis);
                   out->outputs = {o, o};
                   return true;
                 }});
  }
  // Transformer projections: concatenating and splitting the feature axis
  // of sequence activations (merging projections that read one input).
  t.push_back({"Concat2", "Concat", 2, [](const std::vector<const Dims*>& in, Applied* out) {
                 const Dims &a = *in[0], &b = *in[1];
                 if (a.size() != 3 || b.size() != 3 || !DimEqual(a[0], b[0]) || !DimEqual(a[1], b[1])) return false;
                 if (HasProduct(a[2]) || HasProduct(b[2])) return false;  // heads*head_dim: only reshaped into heads
                 out->attrs["axis"] = Attribute::Int(2);
                 out->outputs = {{a[0], a[1], DimAdd(a[2], b[2])}};
                 return true;
               }});
  t.push_back({"SplitSizes2", "Split", 1, [](const std::vector<const Dims*>& in, Applied* out) {
                 const Dims& a = *in[0];
                 rules::Dim first, rest;
                 if (a.size() != 3 || !SplitInTwo(a[2], &first, &rest)) return false;
                 out->constants = {DimsConst({first, rest})};
                 out->attrs["axis"] = Attribute::Int(2);
                 out->outputs = {{a[0], a[1], first}, {a[0], a[1], rest}};
                 return true;
               }});
  t.push_back({"Transpose", "Transpose", 1, [](const std::vector<const Dims*>& in, Applied* out) {
                 const Dims& a = *in[0];
                 if (a.size() != 2) return false;
                 out->attrs["perm"] = Attribute::Ints({1, 0});
                 out->outputs = {{a[1], a[0]}};
                 return true;
               }});
  // Attention's rank-4 transpose: tokens <-> heads.
  for (std::vector<int64_t> perm : {std::vector<int64_t>{0, 2, 1, 3}}) {
    std::string name = "Transpose";
    for (int64_t p : perm) name += std::to_string(p);
    t.push_back({name, "Transpose", 1, [perm](const std::vector<const Dims*>& in, Applied* out) {
                   const Dims& a = *in[0];
                   if (a.size() != 4) return false;
                   out->attrs["perm"] = Attribute::Ints(perm);
                   Dims o;
                   for (int64_t p : perm) o.push_back(a[p]);
                   out->outputs = {o};
                   return true;
                 }});
  }
  // Splitting the features of sequence activations into heads:
  // [n, m, c*w] -> [n, m, c, w] (the target a symbolic constant).
  t.push_back({"ReshapeHeads", "Reshape", 1, [](const std::vector<const Dims*>& in, Applied* out) {
                 const Dims& a = *in[0];
                 if (a.size() != 3 || a[2].terms_size() != 1 || a[2].terms(0).coeff() != 1 || a[2].constant() != 0 ||
                     !IsProductSymbol(a[2].terms(0).symbol()))
                   return false;
                 std::vector<std::string> f = SymbolFactors(a[2].terms(0).symbol());
                 if (f.size() != 2) return false;
                 Dims o = {a[0], a[1], DimSymbol(f[0]), DimSymbol(f[1])};
                 out->constants = {DimsConst(o)};
                 out->outputs = {o};
                 return true;
               }});
  // Per-channel vector reshapes, for folding scales and shifts into convs.
  t.push_back({"Unsqueeze", "Unsqueeze", 1, [](const std::vector<const Dims*>& in, Applied* out) {
                 const Dims& a = *in[0];
                 if (a.size() != 3 || !IsPerChannel(a)) return false;
                 out->constants = {IntsConst({3})};
                 out->outputs = {{a[0], a[1], a[2], DimConst(1)}};
                 return true;
               }});
  t.push_back({"ReshapeToVector", "Reshape", 1, [](const std::vector<const Dims*>& in, Applied* out) {
                 const Dims& a = *in[0];
                 if (a.size() != 3 || !IsPerChannel(a)) return false;
                 out->constants = {IntsConst({-1})};
                 out->outputs = {{a[0]}};
                 return true;
               }});
  t.push_back({"ReshapeToChannels", "Reshape", 1, [](const std::vector<const Dims*>& in, Applied* out) {
                 const Dims& a = *in[0];
                 if (a.size() != 1) return false;
                 out->constants = {IntsConst({-1, 1, 1})};
                 out->outputs = {{a[0], DimConst(1), DimConst(1)}};
                 return true;
               }});
  for (Template& x : t) {
    const OpDef* def = OpRegistry::Global().Find("", x.op);
    x.commutative = def != nullptr && def->commutative && x.arity == 2;
  }
  return t;
}

// ---- evaluation ----
struct Val {
  Dims shape;
  at::Tensor t;
  uint64_t hash = 0;  // structural hash of the value
};

struct NodeRec {
  int tmpl;
  std::vector<int> inputs;  // value indices
  int first_output;         // value index of output 0
  int num_outputs;
  int scales = 0;  // ScalesByScalar of the node
  Applied applied;
  uint64_t hash;
};

SymbolBinding FingerprintBinding();
const double kExactLimit = 1e15;  // well inside float64's 2^53 integer range

std::vector<at::Tensor> Evaluate(const Template& t, const Applied& a, const std::vector<at::Tensor>& args) {
  const OpDef* def = OpRegistry::Global().Find("", t.op);
  if (def == nullptr || !def->HasFingerprint()) Fail("template ", t.name, ": ", t.op, " has no fingerprint semantics");
  Node node;
  node.name = t.name;
  node.op = t.op;
  node.attrs = a.attrs;
  node.inputs.assign(args.size() + a.constants.size(), 0);
  node.outputs.assign(a.outputs.size(), 0);
  std::vector<at::Tensor> in = args;
  for (const auto& c : a.constants) in.push_back(at::tensor(ConstantValues(c, FingerprintBinding()), at::kLong));
  KernelContext ctx(node, *def, std::move(in));
  if (def->fingerprint)
    def->fingerprint(ctx);
  else
    def->kernel(ctx);
  for (auto& o : ctx.outputs) o = o.contiguous() + 0.0;  // -0.0 -> +0.0
  return ctx.outputs;
}

uint64_t TensorHash(const Dims& shape, const at::Tensor& t) {
  uint64_t h = HashBytes(t.data_ptr(), static_cast<size_t>(t.numel()) * sizeof(double), 0x77);
  for (const auto& d : shape) h = HashCombine(h, HashString(DimToString(d)));
  return h;
}

struct Record {
  std::vector<std::pair<int, std::vector<int>>> nodes;  // (template, inputs)
  std::vector<Applied> applied;
  std::vector<int> outputs;  // value indices (sinks)
  std::vector<uint64_t> output_hashes;
  uint64_t fingerprint;
  uint64_t structure;
};

struct Record;
rules::Pattern ToPattern(const Record& r, int universe_size, const std::vector<Template>& templates);
std::string PatternKey(const Record& r, int universe_size, const std::vector<Template>& templates) {
  return SerializeDeterministic(ToPattern(r, universe_size, templates));
}

// Universe inputs that only some templates may read directly (by template
// name): the attention inputs exist for the rules that move a scale through
// attention, not for every rule their shapes would allow.
const std::map<std::string, std::set<std::string>>& Readers() {
  static const std::map<std::string, std::set<std::string>> r = {
      {"K4", {"MatMul"}},
      {"T4", {"ReshapeHeads", "Div"}},
      {"V2", {"Add", "Div"}},
  };
  return r;
}

// +1: a Mul by a scalar operand, -1: a Div by one, 0: neither.
int ScalesByScalar(const Template& t, const std::vector<const Dims*>& in) {
  if (t.op == "Div") return -1;
  if (t.op != "Mul") return 0;
  for (const Dims* d : in)
    if (d->empty()) return 1;
  return 0;
}

class Enumerator {
 public:
  Enumerator(const Settings& s, const std::vector<Template>& templates, const std::vector<rules::TensorVar>& universe,
             const std::vector<at::Tensor>& inputs)
      : s_(s), templates_(templates), universe_size_(static_cast<int>(universe.size())) {
    for (const auto& v : universe) {
      auto it = Readers().find(v.name());
      readers_.push_back(it == Readers().end() ? nullptr : &it->second);
    }
    for (size_t k = 0; k < universe.size(); ++k) {
      Val v;
      v.shape.assign(universe[k].shape().begin(), universe[k].shape().end());
      v.t = inputs[k];
      v.hash = HashCombine(0x51, k);
      vals_.push_back(std::move(v));
    }
    uses_.assign(vals_.size(), 0);
  }

  // All applicable (template, inputs) choices for the current graph.
  std::vector<std::pair<int, std::vector<int>>> Choices() const {
    std::vector<std::pair<int, std::vector<int>>> out;
    int nv = static_cast<int>(vals_.size());
    for (int ti = 0; ti < static_cast<int>(templates_.size()); ++ti) {
      const Template& t = templates_[ti];
      std::vector<int> idx(t.arity, 0);
      std::function<void(int)> rec = [&](int pos) {
        if (pos == t.arity) {
          out.push_back({ti, idx});
          return;
        }
        int start = (t.commutative && pos > 0) ? idx[pos - 1] : 0;
        for (int v = start; v < nv; ++v) {
          idx[pos] = v;
          rec(pos + 1);
        }
      };
      rec(0);
    }
    return out;
  }

  // Tries to add a node; returns false if not applicable / not canonical.
  bool Push(int ti, const std::vector<int>& inputs) {
    const Template& t = templates_[ti];
    // One node never takes the same value twice (X + X, Concat(X, X)): such
    // graphs mostly yield rules about doubling that real models never match.
    for (size_t a = 0; a < inputs.size(); ++a)
      for (size_t b = a + 1; b < inputs.size(); ++b)
        if (inputs[a] == inputs[b]) return false;
    for (int v : inputs)
      if (v < universe_size_ && readers_[v] != nullptr && !readers_[v]->count(t.name)) return false;
    std::vector<const Dims*> shapes;
    for (int v : inputs) shapes.push_back(&vals_[v].shape);
    Applied a;
    if (!t.apply(shapes, &a)) return false;
    // Multiplying and dividing by the scalar in one graph only yields rules
    // about cancelling x * s / s, which real models do not contain.
    const int scales = ScalesByScalar(t, shapes);
    if (scales != 0)
      for (const NodeRec& n : nodes_)
        if (n.scales == -scales) return false;
    // Canonical sequence: a node that does not read the previous node's
    // output must not sort before it.
    if (!nodes_.empty()) {
      const NodeRec& prev = nodes_.back();
      bool reads_prev = false;
      for (int v : inputs) reads_prev |= v >= prev.first_output && v < prev.first_output + prev.num_outputs;
      if (!reads_prev && std::make_pair(ti, inputs) < std::make_pair(prev.tmpl, prev.inputs)) return false;
    }
    for (const NodeRec& n : nodes_)
      if (n.tmpl == ti && n.inputs == inputs) return false;  // duplicate node
    // Distinct universe inputs.
    std::set<int> vars;
    for (const NodeRec& n : nodes_)
      for (int v : n.inputs)
        if (v < universe_size_) vars.insert(v);
    for (int v : inputs)
      if (v < universe_size_) vars.insert(v);
    if (static_cast<int>(vars.size()) > s_.max_inputs) return false;

    std::vector<at::Tensor> args;
    for (int v : inputs) args.push_back(vals_[v].t);
    std::vector<at::Tensor> outs = Evaluate(t, a, args);
    ++sequences_;
    for (const auto& o : outs)
      if (o.numel() > 0 && o.abs().max().item<double>() > kExactLimit) return false;
    NodeRec rec;
    rec.tmpl = ti;
    rec.scales = scales;
    rec.inputs = inputs;
    rec.first_output = static_cast<int>(vals_.size());
    rec.num_outputs = static_cast<int>(outs.size());
    uint64_t h = HashCombine(0x4e, ti);
    for (int v : inputs) h = HashCombine(h, vals_[v].hash);
    rec.hash = h;
    for (size_t k = 0; k < outs.size(); ++k) {
      Val v;
      v.shape = a.outputs[k];
      v.t = outs[k];
      v.hash = HashCombine(h, k + 1);
      vals_.push_back(std::move(v));
      uses_.push_back(0);
    }
    for (int v : inputs) ++uses_[v];
    rec.applied = std::move(a);
    nodes_.push_back(std::move(rec));
    return true;
  }

  void Pop() {
    const NodeRec& n = nodes_.back();
    for (int v : n.inputs) --uses_[v];
    vals_.resize(n.first_output);
    uses_.resize(n.first_output);
    nodes_.pop_back();
  }

  void RecordCurrent() {
    std::vector<int> sinks;
    for (const NodeRec& n : nodes_)
      for (int k = 0; k < n.num_outputs; ++k)
        if (uses_[n.first_output + k] == 0) sinks.push_back(n.first_output + k);
    if (sinks.empty() || static_cast<int>(sinks.size()) > s_.max_outputs) return;
    std::vector<uint64_t> node_hashes, sink_hashes;
    for (const NodeRec& n : nodes_) node_hashes.push_back(n.hash);
    for (int v : sinks) sink_hashes.push_back(vals_[v].hash);
    std::sort(node_hashes.begin(), node_hashes.end());
    std::sort(sink_hashes.begin(), sink_hashes.end());
    uint64_t structure = 0x99;
    for (uint64_t h : node_hashes) structure = HashCombine(structure, h);
    for (uint64_t h : sink_hashes) structure = HashCombine(structure, h);
    std::vector<std::pair<int, std::vector<int>>> seq;
    for (const NodeRec& n : nodes_) seq.push_back({n.tmpl, n.inputs});
    Record r;
    r.nodes = seq;
    for (const NodeRec& n : nodes_) r.applied.push_back(n.applied);
    r.outputs = sinks;
    for (int v : sinks) r.output_hashes.push_back(TensorHash(vals_[v].shape, vals_[v].t));
    // A DAG reached again by another sequence keeps the pattern with the
    // smallest serialization, the same order the final dedup and the shard
    // merge use, so that the result never depends on how work was split.
    auto [it, inserted] = seen_.emplace(structure, records_.size());
    if (!inserted) {
      Record& old = records_[it->second];
      if (PatternKey(r, universe_size_, templates_) < PatternKey(old, universe_size_, templates_)) {
        r.fingerprint = old.fingerprint;
        r.structure = old.structure;
        old = std::move(r);
      }
      return;
    }
    std::vector<uint64_t> sorted = r.output_hashes;
    std::sort(sorted.begin(), sorted.end());
    uint64_t fp = 0xf1;
    for (uint64_t h : sorted) fp = HashCombine(fp, h);
    r.fingerprint = fp;
    r.structure = structure;
    records_.push_back(std::move(r));
  }

  void Dfs(int depth) {
    RecordCurrent();
    if (depth == s_.max_ops) return;
    for (const auto& [ti, inputs] : Choices()) {
      if (!Push(ti, inputs)) continue;
      Dfs(depth + 1);
      Pop();
    }
  }

  std::vector<Record>& records() { return records_; }
  int64_t sequences() const { return sequences_; }

 private:
  const Settings& s_;
  const std::vector<Template>& templates_;
  int universe_size_;
  std::vector<const std::set<std::string>*> readers_;  // per universe input: templates that may read it (null: any)
  std::vector<Val> vals_;
  std::vector<int> uses_;
  std::vector<NodeRec> nodes_;
  std::unordered_map<uint64_t, size_t> seen_;  // structure -> index in records_
  std::vector<Record> records_;
  int64_t sequences_ = 0;
};

rules::Pattern ToPattern(const Record& r, int universe_size, const std::vector<Template>& templates) {
  rules::Pattern p;
  // value index -> (node, output)
  std::map<int, std::pair<int, int>> produced;
  int next_value = universe_size;
  for (size_t k = 0; k < r.nodes.size(); ++k) {
    const Applied& a = r.applied[k];
    for (size_t o = 0; o < a.outputs.size(); ++o) produced[next_value++] = {static_cast<int>(k), static_cast<int>(o)};
  }
  auto ref = [&](int v) {
    rules::Ref out;
    if (v < universe_size) {
      out.set_input(v);
    } else {
      auto [node, output] = produced.at(v);
      out.mutable_node()->set_node(node);
      out.mutable_node()->set_output(output);
    }
    return out;
  };
  for (size_t k = 0; k < r.nodes.size(); ++k) {
    const Template& t = templates[r.nodes[k].first];
    const Applied& a = r.applied[k];
    rules::Node* n = p.add_nodes();
    n->set_op(t.op);
    n->set_num_outputs(static_cast<int>(a.outputs.size()));
    for (int v : r.nodes[k].second) *n->add_inputs() = ref(v);
    for (const auto& c : a.constants) {
      n->add_inputs()->set_constant(p.constants_size());
      *p.add_constants() = c;
    }
    for (const auto& [name, attr] : a.attrs) {
      rules::Attribute* pa = n->add_attrs();
      pa->set_name(name);
      if (attr.type == AttrType::kInt)
        pa->set_i(attr.i);
      else if (attr.type == AttrType::kInts)
        for (int64_t x : attr.ints) pa->mutable_ints()->add_values(x);
      else
        Fail("template attribute '", name, "' has an unsupported type");
    }
  }
  for (int v : r.outputs) *p.add_outputs() = ref(v);
  return p;
}

std::vector<at::Tensor> FingerprintInputs(const std::vector<rules::TensorVar>& universe, const SymbolBinding& b,
                                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<at::Tensor> out;
  for (const auto& var : universe) {
    Shape shape = EvalShape(var, b);
    at::Tensor t = at::empty(shape, at::kDouble);
    double* p = t.data_ptr<double>();
    // Small integers; a scalar gets a larger positive value so that
    // s + s, s * s and friends differ, and a power of two so that dividing
    // by it stays exact.
    for (int64_t i = 0; i < t.numel(); ++i) {
      int64_t v = static_cast<int64_t>(rng() % 7) - 3;
      p[i] = static_cast<double>(shape.empty() ? 8 : v);
    }
    out.push_back(t);
  }
  return out;
}

SymbolBinding FingerprintBinding() {
  SymbolBinding b;
  for (const Symbol& s : kSymbols) b[s.name] = s.fingerprint_value;
  return b;
}

}  // namespace

rules::GeneratorSettings DescribeSettings(const Settings& s) {
  rules::GeneratorSettings g;
  g.set_max_ops(s.max_ops);
  g.set_seed(s.seed);
  g.set_max_outputs(s.max_outputs);
  g.set_max_inputs(s.max_inputs);
  for (const Template& t : Templates()) g.add_ops(t.name);
  for (const auto& v : Universe()) *g.add_universe() = v;
  for (const auto& [sym, value] : FingerprintBinding()) {
    auto* b = g.mutable_fingerprint_shape()->add_bindings();
    b->set_symbol(sym);
    b->set_value(value);
  }
  return g;
}

int64_t FirstChoices(const Settings& s) {
  const std::vector<Template> templates = Templates();
  const std::vector<rules::TensorVar> universe = Universe();
  const std::vector<at::Tensor> inputs = FingerprintInputs(universe, FingerprintBinding(), s.seed);
  return static_cast<int64_t>(Enumerator(s, templates, universe, inputs).Choices().size());
}

rules::GraphShard Enumerate(const Settings& s, Stats* stats, const std::function<void(const std::string&)>& progress,
                            const std::atomic<bool>* stop) {
  if (s.max_ops < 1 || s.max_ops > 4) Fail("--max_ops must be 1 to 4");
  if (s.shard_count < 1 || s.shard_index < 0 || s.shard_index >= s.shard_count)
    Fail("bad shard ", s.shard_index, "/", s.shard_count);
  auto start = std::chrono::steady_clock::now();
  const std::vector<Template> templates = Templates();
  const std::vector<rules::TensorVar> universe = Universe();
  const std::vector<at::Tensor> inputs = FingerprintInputs(universe, FingerprintBinding(), s.seed);

  // First-level choices are the unit of work (threads and shards).
  Enumerator root(s, templates, universe, inputs);
  auto all_first = root.Choices();
  std::vector<std::pair<int, std::vector<int>>> mine;
  for (size_t k = 0; k < all_first.size(); ++k)
    if (static_cast<int>(k % s.shard_count) == s.shard_index) mine.push_back(all_first[k]);

  // One enumerator per worker, made when the worker takes its first item.
  const int threads = std::max(1, s.threads);
  std::vector<std::unique_ptr<Enumerator>> enumerators(threads);
  std::atomic<int64_t> recorded{0};
  std::mutex progress_mu;
  ParallelFor(mine.size(), threads, stop, [&](int w, size_t k) {
    if (!enumerators[w]) enumerators[w] = std::make_unique<Enumerator>(s, templates, universe, inputs);
    Enumerator& e = *enumerators[w];
    size_t before = e.records().size();
    if (e.Push(mine[k].first, mine[k].second)) {
      e.Dfs(1);
      e.Pop();
    }
    recorded += static_cast<int64_t>(e.records().size() - before);
    if (progress && (k % 16 == 0 || k + 1 == mine.size())) {
      std::lock_guard<std::mutex> lock(progress_mu);
      double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      progress("enumerating: " + std::to_string(k + 1) + "/" + std::to_string(mine.size()) + " first operators, " +
               std::to_string(recorded.load()) + " graphs, " + std::to_string(static_cast<int>(el)) + " s");
    }
  });
  if (stop && stop->load()) Fail("interrupted");

  std::vector<Record> all;
  for (auto& e : enumerators)
    if (e)
      for (auto& x : e->records()) all.push_back(std::move(x));
  // The same DAG can be reached in different threads: keep the pattern with
  // the smallest serialization (as MakeCandidates does across shards).
  std::vector<std::pair<std::string, size_t>> keyed;
  keyed.reserve(all.size());
  for (size_t k = 0; k < all.size(); ++k)
    keyed.push_back({PatternKey(all[k], static_cast<int>(universe.size()), templates), k});
  std::sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    const Record &ra = all[a.second], &rb = all[b.second];
    return ra.structure != rb.structure ? ra.structure < rb.structure : a.first < b.first;
  });
  std::vector<Record> unique;
  for (const auto& [key, k] : keyed)
    if (unique.empty() || unique.back().structure != all[k].structure) unique.push_back(std::move(all[k]));
  all = std::move(unique);

  rules::GraphShard shard;
  shard.set_magic(kGraphShardMagic);
  shard.set_format_version(kRuleFormatVersion);
  *shard.mutable_settings() = DescribeSettings(s);
  shard.set_shard_index(s.shard_index);
  shard.set_shard_count(s.shard_count);
  for (const Record& r : all) {
    rules::GraphRecord* g = shard.add_graphs();
    *g->mutable_graph() = ToPattern(r, static_cast<int>(universe.size()), templates);
    g->set_fingerprint(r.fingerprint);
    g->set_structure(r.structure);
    for (uint64_t h : r.output_hashes) g->add_output_hashes(h);
  }
  if (stats) {
    for (auto& e : enumerators)
      if (e) stats->sequences += e->sequences();
    stats->graphs += static_cast<int64_t>(all.size());
    stats->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return shard;
}

namespace {
// Universe indices a pattern reads.
std::set<int> InputsOf(const rules::Pattern& p) {
  std::set<int> s;
  for (const auto& n : p.nodes())
    for (const auto& r : n.inputs())
      if (r.kind_case() == rules::Ref::kInput) s.insert(r.input());
  for (const auto& r : p.outputs())
    if (r.kind_case() == rules::Ref::kInput) s.insert(r.input());
  return s;
}

void Remap(rules::Pattern* p, const std::map<int, int>& m) {
  for (auto& n : *p->mutable_nodes())
    for (auto& r : *n.mutable_inputs())
      if (r.kind_case() == rules::Ref::kInput) r.set_input(m.at(r.input()));
}
}  // namespace

rules::CandidateSet MakeCandidates(const std::vector<rules::GraphShard>& shards, Stats* stats) {
  if (shards.empty()) Fail("no graph shards to merge");
  const rules::GeneratorSettings& settings = shards[0].settings();
  for (const auto& sh : shards)
    if (SerializeDeterministic(sh.settings()) != SerializeDeterministic(settings))
      Fail("graph shards were generated with different settings");
  // Universe-wide pseudo rule for canonical texts.
  rules::Rule universe_rule;
  for (const auto& v : settings.universe()) *universe_rule.add_inputs() = v;

  std::vector<const rules::GraphRecord*> all;
  for (const auto& sh : shards)
    for (const auto& g : sh.graphs()) all.push_back(&g);
  std::sort(all.begin(), all.end(), [](const rules::GraphRecord* a, const rules::GraphRecord* b) {
    if (a->fingerprint() != b->fingerprint()) return a->fingerprint() < b->fingerprint();
    if (a->structure() != b->structure()) return a->structure() < b->structure();
    return SerializeDeterministic(a->graph()) < SerializeDeterministic(b->graph());
  });
  all.erase(std::unique(all.begin(), all.end(),
                        [](const rules::GraphRecord* a, const rules::GraphRecord* b) {
                          return a->structure() == b->structure();
                        }),
            all.end());

  rules::CandidateSet out;
  out.set_magic(kCandidateSetMagic);
  out.set_format_version(kRuleFormatVersion);
  *out.mutable_settings() = settings;
  int64_t distinct = 0, buckets = 0, skipped = 0;
  std::vector<rules::Rule> candidates;
  for (size_t lo = 0; lo < all.size();) {
    size_t hi = lo;
    while (hi < all.size() && all[hi]->fingerprint() == all[lo]->fingerprint()) ++hi;
    ++distinct;
    if (hi - lo >= 2) {
      ++buckets;
      // Representative: fewest ops, then smallest canonical text.
      std::vector<std::pair<std::pair<int, std::string>, const rules::GraphRecord*>> members;
      for (size_t k = lo; k < hi; ++k)
        members.push_back({{all[k]->graph().nodes_size(), CanonicalPattern(universe_rule, all[k]->graph())}, all[k]});
      std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      const rules::GraphRecord* rep = members[0].second;
      std::set<int> rep_inputs = InputsOf(rep->graph());
      for (size_t k = 1; k < members.size(); ++k) {
        const rules::GraphRecord* g = members[k].second;
        if (InputsOf(g->graph()) != rep_inputs) {
          ++skipped;
          continue;
        }
        rules::Rule r;
        std::map<int, int> remap;
        for (int v : rep_inputs) {
          remap[v] = r.inputs_size();
          *r.add_inputs() = settings.universe(v);
        }
        *r.mutable_source() = g->graph();
        *r.mutable_target() = rep->graph();
        Remap(r.mutable_source(), remap);
        Remap(r.mutable_target(), remap);
        // Align source outputs with target outputs by their hashes.
        std::vector<int> order;
        std::vector<char> used(g->output_hashes_size(), 0);
        for (int t = 0; t < rep->output_hashes_size(); ++t) {
          for (int s2 = 0; s2 < g->output_hashes_size(); ++s2)
            if (!used[s2] && g->output_hashes(s2) == rep->output_hashes(t)) {
              used[s2] = 1;
              order.push_back(s2);
              break;
            }
        }
        if (order.size() != static_cast<size_t>(rep->output_hashes_size())) {
          ++skipped;
          continue;
        }
        google::protobuf::RepeatedPtrField<rules::Ref> reordered;
        for (int s2 : order) *reordered.Add() = r.source().outputs(s2);
        *r.mutable_source()->mutable_outputs() = reordered;
        r.mutable_provenance()->set_fingerprint(all[lo]->fingerprint());
        r.set_id(RuleId(r));
        candidates.push_back(std::move(r));
      }
    }
    lo = hi;
  }
  std::sort(candidates.begin(), candidates.end(), [](const rules::Rule& a, const rules::Rule& b) {
    return a.id() != b.id() ? a.id() < b.id() : CanonicalForm(a) < CanonicalForm(b);
  });
  for (auto& c : candidates) *out.add_candidates() = std::move(c);
  if (stats) {
    stats->distinct_fingerprints = distinct;
    stats->buckets = buckets;
    stats->candidates = out.candidates_size();
    stats->skipped_input_mismatch = skipped;
  }
  return out;
}

}  // namespace rlflow::generator

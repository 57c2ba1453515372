// Recurrent layers: RNN, GRU and LSTM (opsets 7 to 17; `layout` from 14), as
// torch.onnx writes nn.RNN / nn.GRU / nn.LSTM (one node per layer and
// direction set) and tf2onnx / paddle2onnx write theirs: every direction,
// the optional bias, sequence lengths, initial states and peepholes, cell
// clipping, GRU's linear_before_reset either way (torch writes 1, ONNX's
// default is 0), batch-first layout, and the activations that take no
// parameters (Sigmoid, Tanh, Relu, Softsign, Softplus).
//
// One kernel for the three: the input projections of all time steps in one
// matmul (X W^T + Wb, and Rb where it adds to the same sum), then one step
// at a time, H R^T and the gates, each direction in turn. Steps past a
// sequence's length (sequence_lens) leave its state unchanged and write
// zeros to Y, as the specification and ONNX Runtime do.
//
// Kept opaque: activations with alpha/beta (Affine, LeakyRelu, HardSigmoid,
// ...), LSTM's input_forget. A node whose weights do not fit X, the hidden
// size and the direction is invalid ONNX and refused with a line naming it.
#include <ATen/TensorOperators.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/softplus.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ops/helpers.h"

namespace rlflow::ops {
namespace {

enum class Cell { kRnn, kGru, kLstm };

int64_t GatesOf(Cell k) { return k == Cell::kRnn ? 1 : k == Cell::kGru ? 3 : 4; }

std::vector<std::string> DefaultActivations(Cell k) {
  if (k == Cell::kRnn) return {"Tanh"};
  if (k == Cell::kGru) return {"Sigmoid", "Tanh"};
  return {"Sigmoid", "Tanh", "Tanh"};
}

int64_t Directions(const AttrReader& c) {
  const std::string d = c.String("direction");
  if (d == "forward" || d == "reverse") return 1;
  if (d == "bidirectional") return 2;
  c.Fail("direction '" + d + "' is not forward, reverse or bidirectional");
}

// The activations of each direction, in order (f; f, g; f, g, h).
std::vector<std::string> ActivationsOf(const AttrReader& c, Cell k, int64_t num_dir) {
  std::vector<std::string> per = DefaultActivations(k), all;
  auto it = c.node().attrs.find("activations");
  if (it != c.node().attrs.end()) {
    if (it->second.type != AttrType::kStrings) c.Fail("attribute 'activations' is not a list of strings");
    all = it->second.strings;
    // One list for both directions is how some exporters write it.
    if (num_dir == 2 && all.size() == per.size())
      all.insert(all.end(), it->second.strings.begin(), it->second.strings.end());
    if (all.size() != per.size() * static_cast<size_t>(num_dir))
      c.Fail("activations has " + std::to_string(all.size()) + " names, expected " +
             std::to_string(per.size() * static_cast<size_t>(num_dir)));
    return all;
  }
  for (int64_t d = 0; d < num_dir; ++d) all.insert(all.end(), per.begin(), per.end());
  return all;
}

bool Runnable(const std::string& a) {
  return a == "Sigmoid" || a == "Tanh" || a == "Relu" || a == "Softsign" || a == "Softplus";
}

at::Tensor Activate(const std::string& a, const at::Tensor& x, const c10::optional<double>& clip) {
  at::Tensor v = clip ? at::clamp(x, -*clip, *clip) : x;
  if (a == "Sigmoid") return at::sigmoid(v);
  if (a == "Tanh") return at::tanh(v);
  if (a == "Relu") return at::relu(v);
  if (a == "Softsign") return v / (v.abs() + 1);
  return at::softplus(v);  // Softplus (Runnable)
}

// Checks a weight-like input's shape where it is known.
void CheckShape(const ShapeContext& c, int i, const char* what, const Shape& want) {
  if (!c.has_input(i)) return;
  const TensorType& t = c.input(i);
  if (!t.rank_known) return;
  bool ok = t.rank() == static_cast<int64_t>(want.size());
  for (size_t k = 0; ok && k < want.size(); ++k)
    if (t.shape[k] >= 0 && want[k] >= 0 && t.shape[k] != want[k]) ok = false;
  if (!ok) c.Fail(std::string(what) + " has shape " + t.ToString() + ", expected " + ShapeToString(want));
}

std::vector<AttrSpec> RecurrentAttrs(Cell k) {
  std::vector<AttrSpec> a = {OptionalAttr("activation_alpha", AttrType::kFloats),
                             OptionalAttr("activation_beta", AttrType::kFloats),
                             OptionalAttr("activations", AttrType::kStrings),
                             OptionalAttr("clip", AttrType::kFloat),
                             StringAttr("direction", "forward"),
                             OptionalAttr("hidden_size", AttrType::kInt),
                             IntAttr("layout", 0)};
  if (k == Cell::kGru) a.push_back(IntAttr("linear_before_reset", 0));
  if (k == Cell::kLstm) a.push_back(IntAttr("input_forget", 0));
  return a;
}

// Input indices: X, W, R, B, sequence_lens, initial_h, then LSTM's
// initial_c and P.
constexpr int kX = 0, kW = 1, kR = 2, kB = 3, kLens = 4, kInitialH = 5, kInitialC = 6, kPeepholes = 7;

std::vector<TensorType> RecurrentShape(const ShapeContext& c, Cell k) {
  const TensorType& x = c.input(kX);
  if (RankOf(c, kX) != 3) c.Fail("X has rank " + std::to_string(x.rank()) + ", expected 3");
  if (!IsFloatingPoint(x.dtype)) c.Fail("X is " + x.ToString() + ", expected a floating type");
  const int64_t layout = c.Int("layout");
  if (layout != 0 && layout != 1) c.Fail("layout " + std::to_string(layout) + " is not 0 or 1");
  const int64_t seq = x.shape[layout == 0 ? 0 : 1], batch = x.shape[layout == 0 ? 1 : 0], in = x.shape[2];
  const int64_t num_dir = Directions(c), gates = GatesOf(k);
  int64_t hidden = kUnknownDim;
  if (c.Has("hidden_size")) {
    hidden = c.Int("hidden_size");
    if (hidden <= 0) c.Fail("hidden_size " + std::to_string(hidden) + " is not positive");
  } else if (c.input(kR).rank_known && c.input(kR).rank() == 3) {
    hidden = c.input(kR).shape[2];
  }
  const int64_t gh = hidden >= 0 ? gates * hidden : kUnknownDim;
  CheckShape(c, kW, "W", {num_dir, gh, in});
  CheckShape(c, kR, "R", {num_dir, gh, hidden});
  CheckShape(c, kB, "B", {num_dir, hidden >= 0 ? 2 * gh : kUnknownDim});
  CheckShape(c, kLens, "sequence_lens", {batch});
  if (c.has_input(kLens) && c.input(kLens).dtype != DType::kInt32 && c.input(kLens).dtype != DType::kInt64)
    c.Fail("sequence_lens is " + c.input(kLens).ToString() + ", expected int32");
  const Shape state = layout == 0 ? Shape{num_dir, batch, hidden} : Shape{batch, num_dir, hidden};
  CheckShape(c, kInitialH, "initial_h", state);
  if (k == Cell::kLstm) {
    CheckShape(c, kInitialC, "initial_c", state);
    CheckShape(c, kPeepholes, "P", {num_dir, hidden >= 0 ? 3 * hidden : kUnknownDim});
    if (c.Int("input_forget") != 0) c.Unsupported("input_forget is not run");
  }
  for (const std::string& a : ActivationsOf(c, k, num_dir))
    if (!Runnable(a)) c.Unsupported("activation '" + a + "' is not run");
  if (!c.Floats("activation_alpha").empty() || !c.Floats("activation_beta").empty())
    c.Unsupported("activations with activation_alpha / activation_beta are not run");
  const Shape y = layout == 0 ? Shape{seq, num_dir, batch, hidden} : Shape{batch, seq, num_dir, hidden};
  std::vector<TensorType> out = {Type(x.dtype, y), Type(x.dtype, state)};
  if (k == Cell::kLstm) out.push_back(Type(x.dtype, state));
  return out;
}

void RecurrentKernel(KernelContext& c, Cell k) {
  const int64_t layout = c.Int("layout");
  at::Tensor x = layout == 0 ? c.in(kX) : c.in(kX).transpose(0, 1);  // [seq, batch, in]
  const int64_t seq = x.size(0), batch = x.size(1);
  const int64_t num_dir = Directions(c), gates = GatesOf(k);
  const at::Tensor& w = c.in(kW);
  const at::Tensor& r = c.in(kR);
  const int64_t hidden = r.size(2);
  if (w.size(1) != gates * hidden || r.size(1) != gates * hidden || w.size(2) != x.size(2))
    c.Fail("W " + ShapeToString(Shape(w.sizes().begin(), w.sizes().end())) + " and R " +
           ShapeToString(Shape(r.sizes().begin(), r.sizes().end())) + " do not fit X and the hidden size");
  const std::vector<std::string> acts = ActivationsOf(c, k, num_dir);
  const size_t per_dir = DefaultActivations(k).size();
  c10::optional<double> clip;
  if (c.Has("clip")) clip = static_cast<double>(c.Float("clip"));
  const bool reverse_only = c.String("direction") == "reverse";
  const bool linear_before_reset = k == Cell::kGru && c.Int("linear_before_reset") != 0;
  at::Tensor lens;  // [batch, 1] int64, or undefined: every sequence is seq long
  if (c.has(kLens)) lens = c.in(kLens).to(at::kLong).reshape({batch, 1});
  auto state_in = [&](int i, int64_t d) {
    if (!c.has(i)) return at::zeros({batch, hidden}, x.options());
    return layout == 0 ? c.in(i).select(0, d) : c.in(i).select(1, d);
  };
  std::vector<at::Tensor> ys, hs, cs;
  for (int64_t d = 0; d < num_dir; ++d) {
    const std::string* f = &acts[static_cast<size_t>(d) * per_dir];
    const bool reverse = d == 1 || reverse_only;
    at::Tensor wd = w.select(0, d), rd = r.select(0, d);
    at::Tensor wb, rb;
    if (c.has(kB)) {
      wb = c.in(kB).select(0, d).narrow(0, 0, gates * hidden);
      rb = c.in(kB).select(0, d).narrow(0, gates * hidden, gates * hidden);
    }
    // Projections of every step: [seq, batch, gates * hidden], with the
    // biases that add to the same sums (all but GRU's Rbh).
    at::Tensor xw = at::matmul(x, wd.t());
    at::Tensor rb_h;
    if (wb.defined()) {
      xw = xw + wb;
      if (k == Cell::kGru) {
        xw.narrow(2, 0, 2 * hidden).add_(rb.narrow(0, 0, 2 * hidden));
        rb_h = rb.narrow(0, 2 * hidden, hidden);
      } else {
        xw = xw + rb;
      }
    }
    at::Tensor pi, po, pf;
    if (k == Cell::kLstm && c.has(kPeepholes)) {
      at::Tensor p = c.in(kPeepholes).select(0, d);
      pi = p.narrow(0, 0, hidden), po = p.narrow(0, hidden, hidden), pf = p.narrow(0, 2 * hidden, hidden);
    }
    at::Tensor h = state_in(kInitialH, d), cell = k == Cell::kLstm ? state_in(kInitialC, d) : at::Tensor();
    std::vector<at::Tensor> y(static_cast<size_t>(seq));
    for (int64_t step = 0; step < seq; ++step) {
      const int64_t t = reverse ? seq - 1 - step : step;
      at::Tensor xt = xw.select(0, t);
      at::Tensor h_new, c_new;
      if (k == Cell::kRnn) {
        h_new = Activate(f[0], at::addmm(xt, h, rd.t()), clip);
      } else if (k == Cell::kGru) {
        at::Tensor zr = at::addmm(xt.narrow(1, 0, 2 * hidden), h, rd.narrow(0, 0, 2 * hidden).t());
        at::Tensor z = Activate(f[0], zr.narrow(1, 0, hidden), clip);
        at::Tensor rt = Activate(f[0], zr.narrow(1, hidden, hidden), clip);
        at::Tensor rh = rd.narrow(0, 2 * hidden, hidden);
        at::Tensor pre;
        if (linear_before_reset) {
          at::Tensor hr = at::matmul(h, rh.t());
          if (rb_h.defined()) hr = hr + rb_h;
          pre = xt.narrow(1, 2 * hidden, hidden) + rt * hr;
        } else {
          pre = at::addmm(xt.narrow(1, 2 * hidden, hidden), rt * h, rh.t());
          if (rb_h.defined()) pre = pre + rb_h;
        }
        at::Tensor hh = Activate(f[1], pre, clip);
        h_new = (1 - z) * hh + z * h;
      } else {
        at::Tensor g = at::addmm(xt, h, rd.t());  // gates i, o, f, c
        at::Tensor gi = g.narrow(1, 0, hidden), go = g.narrow(1, hidden, hidden);
        at::Tensor gf = g.narrow(1, 2 * hidden, hidden), gc = g.narrow(1, 3 * hidden, hidden);
        if (pi.defined()) gi = gi + pi * cell, gf = gf + pf * cell;
        at::Tensor i = Activate(f[0], gi, clip), fg = Activate(f[0], gf, clip);
        c_new = fg * cell + i * Activate(f[1], gc, clip);
        if (po.defined()) go = go + po * c_new;
        h_new = Activate(f[0], go, clip) * Activate(f[2], c_new, c10::nullopt);
      }
      if (lens.defined()) {
        at::Tensor live = lens.gt(t);  // [batch, 1]
        y[static_cast<size_t>(t)] = at::where(live, h_new, at::zeros_like(h_new));
        h = at::where(live, h_new, h);
        if (c_new.defined()) cell = at::where(live, c_new, cell);
      } else {
        y[static_cast<size_t>(t)] = h_new;
        h = h_new;
        if (c_new.defined()) cell = c_new;
      }
    }
    ys.push_back(at::stack(y, 0));  // [seq, batch, hidden]
    hs.push_back(h);
    if (cell.defined()) cs.push_back(cell);
  }
  at::Tensor y_all = at::stack(ys, 1);  // [seq, num_dir, batch, hidden]
  at::Tensor h_all = at::stack(hs, 0);  // [num_dir, batch, hidden]
  if (layout == 1) y_all = y_all.permute({2, 0, 1, 3}), h_all = h_all.transpose(0, 1);
  c.outputs = {y_all.contiguous(), h_all.contiguous()};
  if (k == Cell::kLstm) {
    at::Tensor c_all = at::stack(cs, 0);
    if (layout == 1) c_all = c_all.transpose(0, 1);
    c.outputs.push_back(c_all.contiguous());
  }
}

double RecurrentFlops(const ShapeContext& c, const std::vector<TensorType>& out, Cell k) {
  const TensorType& x = c.input(kX);
  if (!x.IsStatic() || !out[0].IsStatic()) return 0.0;
  const double hidden = static_cast<double>(out[0].shape[3]);
  const double steps = static_cast<double>(x.shape[0] * x.shape[1]);  // seq * batch either layout
  const double num_dir = static_cast<double>(out[0].shape[c.Int("layout") == 0 ? 1 : 2]);
  const double gh = static_cast<double>(GatesOf(k)) * hidden;
  return num_dir * steps * (2.0 * gh * (static_cast<double>(x.shape[2]) + hidden) + 6.0 * gh);
}

template <Cell kCell>
OpDef RecurrentDef(const char* name) {
  OpDef d;
  d.name = name;
  d.since_opset = 7;
  d.min_inputs = 3;
  d.max_inputs = kCell == Cell::kLstm ? 8 : 6;
  d.min_outputs = 0;
  d.max_outputs = kCell == Cell::kLstm ? 3 : 2;
  d.attrs = RecurrentAttrs(kCell);
  d.shape = [](const ShapeContext& c) { return RecurrentShape(c, kCell); };
  d.kernel = [](KernelContext& c) { RecurrentKernel(c, kCell); };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>& out) { return RecurrentFlops(c, out, kCell); };
  return d;
}

RLFLOW_REGISTER_OP(RecurrentDef<Cell::kRnn>("RNN"));
RLFLOW_REGISTER_OP(RecurrentDef<Cell::kGru>("GRU"));
RLFLOW_REGISTER_OP(RecurrentDef<Cell::kLstm>("LSTM"));

}  // namespace
}  // namespace rlflow::ops

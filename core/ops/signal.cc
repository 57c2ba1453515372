// Signal processing (opset 17), as audio front ends exported to ONNX hold
// them: the window generators (HannWindow, HammingWindow, BlackmanWindow),
// DFT and STFT, on ATen's FFT, MelWeightMatrix; and Det. Complex values are a trailing
// dimension of 2 (real, imaginary), as ONNX writes them.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/fft_fft.h>
#include <ATen/ops/fft_ifft.h>
#include <ATen/ops/fft_rfft.h>
#include <ATen/ops/linalg_det.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/zeros_like.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ops/helpers.h"

namespace rlflow::ops {
namespace {

// A scalar (or one-element) integer input's value, if constant.
std::optional<int64_t> ConstantScalar(const ShapeContext& c, int i) {
  if (!c.has_input(i)) return std::nullopt;
  auto v = c.MaybeConstantInts(i);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

// A scalar (or one-element) integer input's value at run time.
int64_t ScalarInput(const KernelContext& c, int i) {
  const std::vector<int64_t> v = c.IntsInput(i);
  if (v.size() != 1) c.Fail("input " + std::to_string(i) + " has " + std::to_string(v.size()) + " values, expected 1");
  return v[0];
}

// output_datatype: a floating type (the others stay opaque).
DType OutputDatatype(const ShapeContext& c) {
  const DType out = DTypeFromCode(static_cast<int32_t>(c.Int("output_datatype")));
  if (!IsFloatingPoint(out))
    c.Unsupported("output_datatype " + std::to_string(c.Int("output_datatype")) + " is not run");
  return out;
}
at::ScalarType OutputDatatype(const KernelContext& c) {
  return ToAtenType(DTypeFromCode(static_cast<int32_t>(c.Int("output_datatype"))));
}

// ---- HannWindow, HammingWindow, BlackmanWindow: w[n] = a0 - a1 cos(2 pi n /
// N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1 (symmetric), in
// float32 (as ONNX's function bodies compute them) then output_datatype.
struct WindowCoefficients {
  double a0, a1, a2;
};

template <int kKind>
OpDef WindowDef(const char* name) {
  OpDef d;
  d.name = name;
  d.since_opset = 17;
  d.attrs = {IntAttr("output_datatype", 1), IntAttr("periodic", 1)};
  d.shape = [](const ShapeContext& c) {
    if (!IsInteger(c.input(0).dtype)) c.Fail("size is " + c.input(0).ToString() + ", expected an integer");
    const DType out = OutputDatatype(c);
    auto size = ConstantScalar(c, 0);
    if (size && *size < 0) c.Fail("size " + std::to_string(*size) + " is negative");
    return std::vector<TensorType>{Type(out, {size ? *size : kUnknownDim})};
  };
  d.kernel = [](KernelContext& c) {
    static const WindowCoefficients kCoefficients[] = {
        {0.5, 0.5, 0.0}, {25.0 / 46.0, 21.0 / 46.0, 0.0}, {0.42, 0.5, 0.08}};
    const WindowCoefficients w = kCoefficients[kKind];
    const int64_t size = ScalarInput(c, 0);
    if (size < 0) c.Fail("size " + std::to_string(size) + " is negative");
    const double n = static_cast<double>(c.Int("periodic") != 0 ? size : size - 1);
    at::Tensor k = at::arange(size, at::kFloat);
    at::Tensor phase = k * static_cast<float>(2 * M_PI / n);
    at::Tensor y = static_cast<float>(w.a0) - static_cast<float>(w.a1) * at::cos(phase);
    if (w.a2 != 0) y = y + static_cast<float>(w.a2) * at::cos(2 * phase);
    c.outputs = {y.to(OutputDatatype(c))};
  };
  return d;
}
RLFLOW_REGISTER_OP(WindowDef<0>("HannWindow"));
RLFLOW_REGISTER_OP(WindowDef<1>("HammingWindow"));
RLFLOW_REGISTER_OP(WindowDef<2>("BlackmanWindow"));

// A [..., 1 or 2] real or complex ONNX signal as an ATen tensor (real or
// complex) without that last dimension.
at::Tensor FromOnnxComplex(const at::Tensor& x) {
  if (x.size(-1) == 1) return x.squeeze(-1);
  return at::view_as_complex(x.contiguous());
}

at::Tensor ToOnnxComplex(const at::Tensor& y) {
  return (y.is_complex() ? at::view_as_real(y) : at::stack({y, at::zeros_like(y)}, -1)).contiguous();
}

void CheckSignal(const ShapeContext& c, int64_t min_rank) {
  const TensorType& x = c.input(0);
  if (RankOf(c, 0) < min_rank) c.Fail("signal " + x.ToString() + " has too few dimensions");
  if (x.shape.back() >= 0 && x.shape.back() != 1 && x.shape.back() != 2)
    c.Fail("signal " + x.ToString() + " does not end in 1 (real) or 2 (complex)");
  if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat64)
    c.Unsupported("signal of " + DTypeName(x.dtype) + " is not run");
}

// ---- DFT (opset 17): along `axis` (not the batch, not the last), of length
// dft_length (the signal cut or padded with zeros), inverse (1/n scaled),
// onesided (the first n/2 + 1 bins of a real signal's).
OpDef DftDef() {
  OpDef d;
  d.name = "DFT";
  d.since_opset = 17;
  d.min_inputs = 1;
  d.max_inputs = 2;
  d.attrs = {IntAttr("axis", 1), IntAttr("inverse", 0), IntAttr("onesided", 0)};
  d.shape = [](const ShapeContext& c) {
    CheckSignal(c, 3);
    const TensorType& x = c.input(0);
    const int64_t rank = x.rank();
    int64_t axis = c.Int("axis");
    if (axis < 0) axis += rank;
    if (axis < 1 || axis >= rank - 1) c.Fail("axis " + std::to_string(c.Int("axis")) + " is not a signal axis");
    if (c.Int("onesided") != 0 && c.Int("inverse") != 0) c.Unsupported("an inverse onesided DFT is not run");
    Shape out = x.shape;
    out.back() = 2;
    int64_t n = x.shape[axis];
    if (c.has_input(1)) {
      auto given = ConstantScalar(c, 1);
      n = given ? *given : kUnknownDim;
      if (given && *given <= 0) c.Fail("dft_length " + std::to_string(*given) + " is not positive");
    }
    out[axis] = n < 0 ? kUnknownDim : c.Int("onesided") != 0 ? n / 2 + 1 : n;
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    int64_t axis = c.Int("axis");
    if (axis < 0) axis += x.dim();
    at::Tensor s = FromOnnxComplex(x);
    c10::optional<int64_t> n;
    if (c.has(1)) n = ScalarInput(c, 1);
    if (n && *n <= 0) c.Fail("dft_length " + std::to_string(*n) + " is not positive");
    at::Tensor y;
    if (c.Int("inverse") != 0) {
      y = at::fft_ifft(s, n, axis);
    } else if (c.Int("onesided") != 0 && !s.is_complex()) {
      y = at::fft_rfft(s, n, axis);
    } else {
      y = at::fft_fft(s, n, axis);
      if (c.Int("onesided") != 0) y = y.narrow(axis, 0, y.size(axis) / 2 + 1);
    }
    c.outputs = {ToOnnxComplex(y).to(x.scalar_type())};
  };
  d.flops = [](const ShapeContext&, const std::vector<TensorType>& out) {
    return 5.0 * Numel(out[0]) * std::log2(std::max(2.0, Numel(out[0])));
  };
  return d;
}
RLFLOW_REGISTER_OP(DftDef());

// ---- STFT (opset 17): frames of frame_length (or the window's length)
// every frame_step samples, each times the window, transformed: [batch,
// frames, bins, 2], bins = frame_length / 2 + 1 if onesided.
OpDef StftDef() {
  OpDef d;
  d.name = "STFT";
  d.since_opset = 17;
  d.min_inputs = 2;
  d.max_inputs = 4;
  d.attrs = {IntAttr("onesided", 1)};
  d.shape = [](const ShapeContext& c) {
    CheckSignal(c, 3);
    const TensorType& x = c.input(0);
    if (x.rank() != 3) c.Fail("signal " + x.ToString() + " is not [batch, length, 1 or 2]");
    int64_t length = kUnknownDim;
    if (c.has_input(3)) {
      auto given = ConstantScalar(c, 3);
      if (given) length = *given;
    } else if (c.has_input(2) && RankOf(c, 2) == 1) {
      length = c.input(2).shape[0];
    } else if (!c.has_input(2)) {
      c.Fail("neither window nor frame_length is given");
    }
    if (c.has_input(2) && c.input(2).rank_known && c.input(2).rank() != 1) c.Fail("window is not 1-D");
    auto step = ConstantScalar(c, 1);
    if (step && *step <= 0) c.Fail("frame_step " + std::to_string(*step) + " is not positive");
    int64_t frames = kUnknownDim;
    if (step && length > 0 && x.shape[1] >= 0) {
      if (length > x.shape[1]) c.Fail("frame_length " + std::to_string(length) + " exceeds the signal");
      frames = (x.shape[1] - length) / *step + 1;
    }
    const int64_t bins = length < 0 ? kUnknownDim : c.Int("onesided") != 0 ? length / 2 + 1 : length;
    return std::vector<TensorType>{Type(x.dtype, {x.shape[0], frames, bins, 2})};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    at::Tensor s = FromOnnxComplex(x);  // [batch, length]
    const int64_t step = ScalarInput(c, 1);
    at::Tensor window = c.has(2) ? c.in(2) : at::Tensor();
    const int64_t length = c.has(3) ? ScalarInput(c, 3) : window.size(0);
    if (step <= 0) c.Fail("frame_step " + std::to_string(step) + " is not positive");
    if (length <= 0 || length > s.size(1))
      c.Fail("frame_length " + std::to_string(length) + " does not fit a signal of " + std::to_string(s.size(1)));
    if (window.defined() && window.numel() != length)
      c.Fail("the window has " + std::to_string(window.numel()) + " values for frames of " + std::to_string(length));
    at::Tensor frames = s.unfold(1, length, step);  // [batch, frames, length]
    if (window.defined()) frames = frames * window.to(frames.is_complex() ? at::kFloat : frames.scalar_type());
    at::Tensor y;
    if (c.Int("onesided") != 0 && !frames.is_complex()) {
      y = at::fft_rfft(frames, c10::nullopt, -1);
    } else {
      y = at::fft_fft(frames, c10::nullopt, -1);
      if (c.Int("onesided") != 0) y = y.narrow(-1, 0, length / 2 + 1);
    }
    c.outputs = {ToOnnxComplex(y).to(x.scalar_type())};
  };
  d.flops = [](const ShapeContext&, const std::vector<TensorType>& out) {
    return 5.0 * Numel(out[0]) *
           std::log2(std::max(2.0, out[0].shape.size() == 4 ? static_cast<double>(out[0].shape[2]) : 2.0));
  };
  return d;
}
RLFLOW_REGISTER_OP(StftDef());

// ---- MelWeightMatrix (opset 17): [dft_length / 2 + 1, num_mel_bins]
// triangular filters between lower_edge_hertz and upper_edge_hertz, evenly
// spaced on the mel scale (2595 log10(1 + f / 700)), each rising from its
// left edge bin to its centre bin and falling to its right edge bin, as
// ONNX's reference computes them (the mel step divides by num_mel_bins + 2;
// ONNX Runtime 1.30 gives the same).
OpDef MelWeightMatrixDef() {
  OpDef d;
  d.name = "MelWeightMatrix";
  d.since_opset = 17;
  d.min_inputs = d.max_inputs = 5;
  d.attrs = {IntAttr("output_datatype", 1)};
  d.shape = [](const ShapeContext& c) {
    const DType out = OutputDatatype(c);
    for (int i = 0; i < 3; ++i)
      if (!IsInteger(c.input(i).dtype)) c.Fail("input " + std::to_string(i) + " is not an integer");
    auto bins = ConstantScalar(c, 0), dft = ConstantScalar(c, 1);
    if (bins && *bins <= 0) c.Fail("num_mel_bins " + std::to_string(*bins) + " is not positive");
    if (dft && *dft <= 0) c.Fail("dft_length " + std::to_string(*dft) + " is not positive");
    return std::vector<TensorType>{Type(out, {dft ? *dft / 2 + 1 : kUnknownDim, bins ? *bins : kUnknownDim})};
  };
  d.kernel = [](KernelContext& c) {
    const int64_t bins = ScalarInput(c, 0), dft = ScalarInput(c, 1), rate = ScalarInput(c, 2);
    const double lower = c.in(3).reshape({-1})[0].item<double>(), upper = c.in(4).reshape({-1})[0].item<double>();
    if (bins <= 0 || dft <= 0 || rate <= 0) c.Fail("num_mel_bins, dft_length and sample_rate must be positive");
    if (!(lower >= 0 && upper > lower)) c.Fail("the edges must satisfy 0 <= lower_edge_hertz < upper_edge_hertz");
    const int64_t spectrum = dft / 2 + 1;
    auto mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
    const double low_mel = mel(lower), step = (mel(upper) - low_mel) / static_cast<double>(bins + 2);
    std::vector<int64_t> edge(static_cast<size_t>(bins + 2));
    for (int64_t k = 0; k < bins + 2; ++k) {
      const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(k) * step + low_mel) / 2595.0) - 1.0);
      edge[static_cast<size_t>(k)] =
          static_cast<int64_t>(std::floor(static_cast<double>(dft + 1) * hz / static_cast<double>(rate)));
    }
    at::Tensor out = at::zeros({spectrum, bins}, at::kDouble);
    double* o = out.data_ptr<double>();
    auto set = [&](int64_t row, int64_t col, double v) {
      if (row < 0 || row >= spectrum)
        c.Fail("a filter edge falls outside the spectrum (upper_edge_hertz above the Nyquist rate?)");
      o[row * bins + col] = v;
    };
    for (int64_t i = 0; i < bins; ++i) {
      const int64_t left = edge[static_cast<size_t>(i)], centre = edge[static_cast<size_t>(i + 1)],
                    right = edge[static_cast<size_t>(i + 2)];
      if (centre == left) {
        set(centre, i, 1.0);
      } else {
        for (int64_t j = left; j <= centre; ++j)
          set(j, i, static_cast<double>(j - left) / static_cast<double>(centre - left));
      }
      for (int64_t j = centre; j < right; ++j)
        set(j, i, static_cast<double>(right - j) / static_cast<double>(right - centre));
    }
    c.outputs = {out.to(OutputDatatype(c))};
  };
  return d;
}
RLFLOW_REGISTER_OP(MelWeightMatrixDef());

// ---- Det (opsets 11, 22): the determinants of the trailing square matrices.
OpDef DetDef() {
  OpDef d;
  d.name = "Det";
  d.since_opset = 11;
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const int64_t rank = RankOf(c, 0);
    if (rank < 2) c.Fail("input " + x.ToString() + " is not [..., M, M]");
    if (x.shape[rank - 1] >= 0 && x.shape[rank - 2] >= 0 && x.shape[rank - 1] != x.shape[rank - 2])
      c.Fail("input " + x.ToString() + " is not [..., M, M]");
    if (!IsFloatingPoint(x.dtype)) c.Fail("input is " + x.ToString() + ", expected a floating type");
    return std::vector<TensorType>{Type(x.dtype, Shape(x.shape.begin(), x.shape.end() - 2))};
  };
  d.kernel = [](KernelContext& c) { c.outputs = {at::linalg_det(c.in(0))}; };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>&) { return 2.0 * Numel(c.input(0)); };
  return d;
}
RLFLOW_REGISTER_OP(DetDef());

}  // namespace
}  // namespace rlflow::ops

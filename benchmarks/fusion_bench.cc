// What the transformer and conv rewrites can gain at the kernel level: each
// pair of alternatives timed against each other in interleaved pairs (A B,
// B A, ...) in thread CPU time on one pinned thread, reported as the median
// of per-pair ratios with its 95% interval (runtime/stats).
//
//   ./bazelw run //benchmarks:fusion_bench [-- --pairs=40]
#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/div.h>
#include <ATen/ops/erf.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/split.h>
#include <gflags/gflags.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/cli.h"
#include "core/error.h"
#include "runtime/stats.h"
#include "runtime/threads.h"

DEFINE_int32(pairs, 40, "interleaved pairs per comparison");

namespace rlflow {
namespace {

// Median ms of each and the speedup of b over a (a / b per pair).
void Compare(const std::string& what, const std::string& a_name, const std::function<void()>& a,
             const std::string& b_name, const std::function<void()>& b) {
  for (int k = 0; k < 3; ++k) {
    a();
    b();
  }
  std::vector<double> ta, tb;
  auto time = [](const std::function<void()>& f, std::vector<double>* out) {
    double t0 = ThreadCpuMs();
    f();
    out->push_back(ThreadCpuMs() - t0);
  };
  for (int k = 0; k < FLAGS_pairs; ++k) {
    if (k % 2 == 0) {
      time(a, &ta);
      time(b, &tb);
    } else {
      time(b, &tb);
      time(a, &ta);
    }
  }
  RatioInterval r = PairedRatio(ta, tb);
  std::printf("| %s | %s | %.3f | %s | %.3f | %.3fx [%.3f, %.3f] |\n", what.c_str(), a_name.c_str(), Median(ta),
              b_name.c_str(), Median(tb), r.median, r.lo, r.hi);
  std::fflush(stdout);
}

int Run() {
  if (FLAGS_pairs < 6) Fail("--pairs must be >= 6 for a 95% interval");
  SetComputeThreads(1);
  SetSteadyAllocation();
  at::manual_seed(1);
  std::printf("| rewrite | A | A (ms) | B | B (ms) | speedup of B [95%%] |\n|---|---|---:|---|---:|---:|\n");

  // BERT-Base projections: sequence 128, hidden 768.
  at::Tensor x = at::randn({1, 128, 768});
  std::vector<at::Tensor> w, bias;
  for (int k = 0; k < 3; ++k) {
    w.push_back(at::randn({768, 768}));
    bias.push_back(at::randn({768}));
  }
  at::Tensor w_qkv = at::cat(w, 1), b_qkv = at::cat(bias, 0);
  Compare(
      "merge Q/K/V projections (BERT-Base)", "3 x (MatMul + Add)",
      [&] {
        for (int k = 0; k < 3; ++k) (void)(at::matmul(x, w[k]) + bias[k]);
      },
      "MatMul + Add + Split", [&] { (void)at::split(at::matmul(x, w_qkv) + b_qkv, 768, -1); });
  at::Tensor x2 = x.reshape({128, 768});
  Compare(
      "MatMul + Add -> Gemm (BERT-Base projection)", "MatMul + Add", [&] { (void)(at::matmul(x, w[0]) + bias[0]); },
      "Gemm (addmm)", [&] { (void)at::addmm(bias[0], x2, w[0]); });
  // GELU as exported by PyTorch vs one fused kernel (ONNX Gelu needs opset 20).
  at::Tensor h = at::randn({1, 128, 3072});
  at::Tensor sqrt2 = at::scalar_tensor(std::sqrt(2.0f)), one = at::scalar_tensor(1.0f), half = at::scalar_tensor(0.5f);
  Compare(
      "GELU fusion (BERT-Base FFN, needs opset 20)", "Div, Erf, Add, Mul, Mul",
      [&] { (void)at::mul(at::mul(h, at::add(at::erf(at::div(h, sqrt2)), one)), half); }, "Gelu",
      [&] { (void)at::gelu(h); });
  at::Tensor scores = at::randn({1, 12, 128, 128}), q = at::randn({1, 12, 128, 64}), k = at::randn({1, 12, 64, 128});
  at::Tensor eight = at::scalar_tensor(8.0f);
  Compare(
      "attention scale folded into the query weights", "MatMul + Div", [&] { (void)at::div(at::matmul(q, k), eight); },
      "MatMul", [&] { (void)at::matmul(q, k); });
  // ResNet-50 convs: a batch norm's shift as a separate Add vs the conv's bias.
  struct ConvCase {
    int c, hw, kernel, out;
  };
  for (ConvCase cc : {ConvCase{64, 56, 1, 256}, ConvCase{64, 56, 3, 64}, ConvCase{256, 56, 1, 64},
                      ConvCase{128, 28, 3, 128}, ConvCase{1024, 14, 1, 256}}) {
    at::Tensor in = at::randn({1, cc.c, cc.hw, cc.hw}), wc = at::randn({cc.out, cc.c, cc.kernel, cc.kernel});
    at::Tensor b = at::randn({cc.out}), b3 = b.reshape({cc.out, 1, 1});
    int64_t pad = cc.kernel / 2;
    char what[128];
    std::snprintf(what, sizeof what, "shift into conv bias (%dx%d conv, %d -> %d ch, %dx%d)", cc.kernel, cc.kernel,
                  cc.c, cc.out, cc.hw, cc.hw);
    Compare(
        what, "Conv + Add", [&] { (void)at::add(at::conv2d(in, wc, {}, 1, pad), b3); }, "Conv with bias",
        [&] { (void)at::conv2d(in, wc, b, 1, pad); });
  }
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) { return rlflow::cli::Main(argc, argv, "fusion_bench [--pairs=N]", rlflow::Run); }

// The CUDA backend on every zoo model (C++ builders, batch 1, BERT's
// sequence 128, random weights from seed 1): for each model, the
// nodes that run on the host (and why), the largest relative error of the
// outputs against the CPU executor on the same random inputs, the median
// time of 30 warm whole runs (cudaEvents around each; interquartile range),
// and where the time goes per operator (events around every node, 10 more
// runs). No flags: the protocol is fixed so that figures from different
// machines compare. Prints the device and library versions first. The CPU
// executor's time is printed for orientation only (one run, ATen's default
// thread count, stated).
//
//   ./bazelw run //benchmarks:cuda_zoo_bench
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <vector>

#include "core/error.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/executor.h"
#include "runtime/executor.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

int Bench(const std::string& model) {
  Graph g = zoo::Build(model, 1);
  std::vector<at::Tensor> inputs = RandomInputs(g, 1);
  Executor cpu(g);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<at::Tensor> want = cpu.Run(inputs);
  const double cpu_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  cuda::CudaExecutor gpu(g);
  gpu.SetInputs(inputs);
  for (int k = 0; k < 3; ++k) gpu.Run();
  std::vector<at::Tensor> got = gpu.Outputs();
  double error = 0;
  for (size_t k = 0; k < got.size(); ++k) error = std::max(error, RelativeError(got[k], want[k]));
  std::vector<double> runs;
  for (int k = 0; k < 30; ++k) runs.push_back(gpu.Run());
  std::map<std::string, double> per_op;
  std::vector<double> node_ms;
  for (int k = 0; k < 10; ++k) {
    gpu.Run(&node_ms);
    for (NodeId id = 0; id < g.num_nodes(); ++id) per_op[g.node(id).op] += node_ms[id] / 10;
  }
  std::printf("%s: %d nodes, %zu on the host; max relative error vs the CPU executor %.2e\n", model.c_str(),
              g.num_nodes(), gpu.HostNodes().size(), error);
  for (size_t k = 0; k < gpu.HostNodes().size() && k < 5; ++k) std::printf("  host: %s\n", gpu.HostNodes()[k].c_str());
  std::printf("  GPU whole run: median %.3f ms (IQR %.3f to %.3f) over 30 warm runs\n", Quantile(runs, 0.5),
              Quantile(runs, 0.25), Quantile(runs, 0.75));
  std::vector<std::pair<double, std::string>> ops;
  double total = 0;
  for (const auto& [op, ms] : per_op) {
    ops.push_back({ms, op});
    total += ms;
  }
  std::sort(ops.rbegin(), ops.rend());
  std::printf("  per operator (sum of node events, mean of 10 runs, total %.3f ms):", total);
  for (size_t k = 0; k < ops.size() && k < 8; ++k) std::printf(" %s %.3f", ops[k].second.c_str(), ops[k].first);
  std::printf("\n  CPU executor: one run %.1f ms (%d ATen threads), for orientation\n", cpu_ms, at::get_num_threads());
  return error < 1e-3 ? 0 : 1;
}

}  // namespace
}  // namespace rlflow

int main() {
  const rlflow::cuda::DeviceInfo d = rlflow::cuda::ProbeDevice();
  if (!d.available) {
    std::fprintf(stderr, "error: %s\n", d.error.c_str());
    return 1;
  }
  std::printf("device: %s\n", d.Fingerprint().c_str());
  int bad = 0;
  try {
    for (const std::string& model : rlflow::zoo::ModelNames()) bad += rlflow::Bench(model);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  if (bad > 0) std::fprintf(stderr, "error: %d model(s) differ from the CPU executor beyond 1e-3\n", bad);
  return bad > 0 ? 1 : 0;
}

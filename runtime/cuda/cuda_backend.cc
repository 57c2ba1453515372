// --device=cuda: graphs timed on the first CUDA device with the CUDA
// executor (executor.h): cudaEvent times of whole warm runs, each node timed
// by events around it inside whole runs, the same paired A/B scheme as the
// CPU backend (a b, b a, ...). Its fingerprint (GPU, compute capability,
// driver, CUDA runtime, cuDNN and cuBLAS versions) keys the timing cache.
// On a machine without a driver or device, making it is a one-line error.
#include <time.h>

#include <algorithm>

#include "core/error.h"
#include "runtime/cost_model.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/executor.h"
#include "runtime/executor.h"
#include "runtime/stats.h"

namespace rlflow::cuda {
namespace {

double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// Node times measured with an event pair around each node, adjusted to add
// up to `run_ms` (a run without node events): the excess over it is taken
// off equally from every node that ran (none below a tenth of its own
// time), then the rest scaled to the run exactly.
void RemoveEventCost(std::vector<double>& node_ms, double run_ms) {
  double total = 0;
  int ran = 0;
  for (double ms : node_ms)
    if (ms > 0) {
      total += ms;
      ++ran;
    }
  if (ran == 0 || run_ms <= 0 || total <= 0) return;
  if (total > run_ms) {
    const double per_node = (total - run_ms) / ran;
    for (double& ms : node_ms)
      if (ms > 0) ms = std::max(ms - per_node, 0.1 * ms);
  }
  double adjusted = 0;
  for (double ms : node_ms) adjusted += ms;
  for (double& ms : node_ms) ms *= run_ms / adjusted;
}

class CudaBackend : public TimingBackend {
 public:
  explicit CudaBackend(DeviceInfo device) : device_(std::move(device)) {}
  std::string name() const override { return "cuda"; }
  std::string fingerprint() const override { return "cuda " + device_.Fingerprint(); }
  // Its Transpose copies (PlanTranspose): every tensor is contiguous.
  bool permuted_views() const override { return false; }

  double TimeGraph(const Graph& graph, const TimingOptions& o) override {
    CudaExecutor e(graph);
    e.SetInputs(RandomInputs(graph, o.seed));
    const int reps = Reps(e, o);
    std::vector<double> samples;
    for (int k = 0; k < std::max(o.samples, 1); ++k) {
      double total = 0;
      for (int r = 0; r < reps; ++r) total += e.Run();
      samples.push_back(total / reps);
    }
    return Median(samples);
  }

  PairedTimes TimePaired(const Graph& a, const Graph& b, int pairs, const TimingOptions& o) override {
    CudaExecutor ea(a), eb(b);
    const std::vector<at::Tensor> inputs = RandomInputs(a, o.seed);
    ea.SetInputs(inputs);
    eb.SetInputs(inputs);
    const int reps = std::max(Reps(ea, o), Reps(eb, o));
    PairedTimes t;
    t.cpu_clock = "thread";  // the host thread that launches the work
    auto time = [&](CudaExecutor& e, std::vector<double>* wall, std::vector<double>* cpu) {
      const double c0 = ThreadCpuMs();
      double total = 0;
      for (int r = 0; r < reps; ++r) total += e.Run();
      wall->push_back(total / reps);
      cpu->push_back((ThreadCpuMs() - c0) / reps);
    };
    RunAlternately(pairs, [&](bool a) { a ? time(ea, &t.wall_a, &t.cpu_a) : time(eb, &t.wall_b, &t.cpu_b); });
    return t;
  }

  // Every node timed by an event pair around it, in whole runs; each such
  // run is followed by one without node events. The events cost the stream
  // about the same few microseconds per node, so the node times add up to
  // more than an event-free run: that excess, shared equally by the nodes
  // that run (each keeping at least a tenth of its own time), is taken off,
  // and the rest scaled so that the nodes add up to the median event-free
  // run, the time TimeGraph and TimePaired measure.
  InContextTimes TimeNodesInContext(const Graph& g, int runs, const TimingOptions& o) override {
    CudaExecutor e(g);
    e.SetInputs(RandomInputs(g, o.seed));
    std::vector<double> node_ms;
    for (int k = 0; k < std::max(o.warmup, 1); ++k) e.Run(&node_ms);
    std::vector<std::vector<double>> samples(g.num_nodes());
    std::vector<double> with_events, plain;
    for (int r = 0; r < std::max(runs, 1); ++r) {
      with_events.push_back(e.Run(&node_ms));
      for (NodeId id = 0; id < g.num_nodes(); ++id) samples[id].push_back(node_ms[id]);
      plain.push_back(e.Run());
    }
    InContextTimes t = SummariseInContext(samples, plain);
    RemoveEventCost(t.node_ms, t.run_ms);
    return t;
  }

 private:
  // Warm-up runs, then how many runs make a sample last o.min_sample_ms.
  static int Reps(CudaExecutor& e, const TimingOptions& o) {
    double shortest = 1e30;
    for (int k = 0; k < std::max(o.warmup, 1); ++k) shortest = std::min(shortest, e.Run());
    if (shortest > 0 && shortest < o.min_sample_ms)
      return std::min(1000, static_cast<int>(o.min_sample_ms / shortest) + 1);
    return 1;
  }

  DeviceInfo device_;
};

}  // namespace

std::unique_ptr<TimingBackend> MakeCudaBackend() {
  DeviceInfo device = ProbeDevice();
  if (!device.available) Fail("--device=cuda: ", device.error);
  return std::make_unique<CudaBackend>(std::move(device));
}

RLFLOW_REGISTER_BACKEND(cuda, BackendInfo{"cuda",
                                          "the first CUDA device: cuBLAS, cuDNN and rlflow's kernels, float32, "
                                          "cudaEvent timings (a one-line error where there is no device)",
                                          {},
                                          "onnx",
                                          /*newest_opset=*/false,
                                          [](const BackendOptions&) { return MakeCudaBackend(); }});

}  // namespace rlflow::cuda

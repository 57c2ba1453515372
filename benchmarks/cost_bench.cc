// Cost-model accuracy: the measured per-operator estimate (sum of op costs)
// against the measured end-to-end time of the whole graph on the executor.
//
//   ./bazelw run //benchmarks:cost_bench -- --models=resnet50,bert_base
//
// With --model=FILE (an ONNX file, --input_shape as the optimiser's), the
// two ways the optimiser times the original are compared instead, in
// --method_pairs interleaved pairs: the calibration's whole run (median of
// in-context runs spanning about 1 s, what a fresh cache's estimate adds up
// to) and the verdict's measurement (the optimiser's settings: median of
// up to 40 samples of at least 25 ms). Their ratio's interval says whether
// the estimate error of the original is the methods' doing or the machine's
// drift between them.
// With --explain=OTHER.onnx [--device=ort] [--timing_cache=PATH], the cost
// model's estimate of OTHER (a rewrite of --model, e.g. the optimiser's
// output with --force_optimised) against --model's, in --model's context
// and with the cache the search had: per op type, and the cost keys whose
// share differs most (why the search found a graph cheaper).
// With --self_pairs=N [--device=ort], the verdict's paired measurement of
// the model against a second import of itself, N times: the pairing's bias.
// With --repeat=N, the verdict's measurement alone, N times --gap_s apart:
// how far two measurements of one graph drift apart on this machine, the
// floor under any estimate's error. With --statistic_repeat=N, N pairs of a
// calibration-like and a verdict-like window --gap_s apart, each summarised
// by its median, 10th percentile and minimum: which statistic follows the
// machine's drift best. With --probe_repeat=N, N windows of 100 ms of the
// model's runs, each between two of a fixed probe workload (--probe): if
// the machine's speed moved as a whole, the ratio would stay put.
//
//   ./bazelw run //benchmarks:cost_bench -- --model=m.onnx --input_shape=x:1,3,224,224
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "core/cli.h"
#include "core/error.h"
#include "core/node_key.h"
#include "core/onnx_io.h"
#include "core/passes/interface.h"
#include "core/passes/lower_batchnorm.h"
#include "runtime/cost_model.h"
#include "runtime/executor.h"
#include "runtime/stats.h"
#include "runtime/threads.h"
#include "zoo/zoo.h"

DEFINE_string(models, "", "comma-separated zoo models (default: all)");
DEFINE_int32(runs, 10, "end-to-end runs (median)");
DEFINE_bool(profile, false, "per-op comparison");
DEFINE_int32(threads, 1, "ATen and OpenBLAS threads");
DEFINE_string(model, "", "an ONNX file: compare the calibration's whole run with the verdict's measurement");
DEFINE_string(input_shape, "", "with --model: NAME:D1,D2,...[;NAME2:...] as the optimiser's");
DEFINE_int32(method_pairs, 10, "with --model: interleaved pairs of the two measurements");
DEFINE_int32(repeat, 0, "with --model: instead, the verdict's measurement this many times, --gap_s apart");
DEFINE_double(gap_s, 5, "with --repeat: seconds between measurements");
DEFINE_int32(self_pairs, 0,
             "with --model: instead, the verdict's paired measurement of the model against a second import of "
             "itself (its weights apart), this many times: the pairing's bias (1.000 when there is none)");
DEFINE_string(device, "cpu", "with --self_pairs: the timing backend (cpu or ort)");
DEFINE_int32(pairs, 40, "with --self_pairs: pairs per measurement (the verdict's default)");
DEFINE_double(min_sample_ms, 0,
              "with --self_pairs: each sample at least this long (0: the verdict's, 1000 / min(--pairs, 40) ms)");
DEFINE_int32(blocks, 0,
             "with --self_pairs: session pairs (ONNX Runtime's blocks of fresh sessions; 0: the verdict's, "
             "VerdictBlocks)");
DEFINE_string(explain, "",
              "with --model: instead, the cost model's estimate of this ONNX file (a rewrite of --model) against "
              "--model's, per op type and per cost key");
DEFINE_string(timing_cache, "", "with --explain: the timing cache to cost with (as the optimiser's)");
DEFINE_int32(probe_repeat, 0,
             "with --model: instead, this many windows of the model's runs each beside a fixed probe workload "
             "(--probe), --gap_s apart: whether the probe's speed follows the model's");
DEFINE_string(probe, "gemm", "with --probe_repeat: gemm (8 GEMMs of 96 x 96) or stream (adding two 4 MB vectors)");
DEFINE_int32(statistic_repeat, 0,
             "with --model: instead, this many (calibration-like window, --gap_s, verdict-like window) triples, "
             "each window summarised by its median, 10th percentile and minimum");

namespace rlflow {
namespace {

// The verdict's paired measurement of a model against itself, imported
// twice so that each holds its own weights (as an optimised graph's folded
// weights are its own): any speedup it finds beyond its interval is the
// pairing's doing (which of the two is set up first, where its weights
// lie), not the graphs'.
int SelfPairs() {
  ImportOptions io;
  io.input_shapes = ParseInputShapes(FLAGS_input_shape);
  Graph a = ImportOnnxFile(FLAGS_model, io), b = ImportOnnxFile(FLAGS_model, io);
  if (FLAGS_device == "cpu") a = CutAtOpaque(a), b = CutAtOpaque(b);
  auto backend = MakeTimingBackend(FLAGS_device);
  int faster = 0, slower = 0;
  std::vector<double> medians;
  for (int k = 0; k < FLAGS_self_pairs; ++k) {
    TimingOptions timing = VerdictTiming(FLAGS_pairs, 1 + k);
    if (FLAGS_min_sample_ms > 0) timing.min_sample_ms = FLAGS_min_sample_ms;
    if (FLAGS_blocks > 0) timing.blocks = FLAGS_blocks;
    const PairedTimes t = backend->TimePaired(a, b, FLAGS_pairs, timing);
    const RatioInterval w = BlockedPairedRatio(t.wall_a, t.wall_b, t.blocks),
                        c = BlockedPairedRatio(t.cpu_a, t.cpu_b, t.blocks);
    std::string per_block;  // each pair of sessions' median ratio (wall)
    for (double m : BlockMedianRatios(t.wall_a, t.wall_b, t.blocks))
      per_block += (per_block.empty() ? "" : ", ") + std::to_string(m).substr(0, 5);
    if (!per_block.empty()) std::printf("  per pair of sessions: %s\n", per_block.c_str());
    faster += w.Above1() ? 1 : 0;
    slower += w.Below1() ? 1 : 0;
    medians.push_back(w.median);
    std::printf(
        "measurement %d: copy's speedup %.3fx [%.3f, %.3f] wall, %.3fx [%.3f, %.3f] CPU (%d pairs, %zu blocks)\n", k,
        w.median, w.lo, w.hi, c.median, c.lo, c.hi, w.n, std::max<size_t>(1, t.blocks.size()));
    std::fflush(stdout);
  }
  std::printf(
      "%s on %s: %d measurements of %d pairs, median speedup %.3fx; 'faster' %d, 'slower' %d (0 and 0 when "
      "the pairing is unbiased, up to about 5%% of them by chance)\n",
      FLAGS_model.c_str(), FLAGS_device.c_str(), FLAGS_self_pairs, FLAGS_pairs, Median(medians), faster, slower);
  return 0;
}

// The estimate of a rewrite of a model against the model's, node by node.
int Explain() {
  ImportOptions io;
  io.input_shapes = ParseInputShapes(FLAGS_input_shape);
  Graph a = CutAtOpaque(ImportOnnxFile(FLAGS_model, io)), b = CutAtOpaque(ImportOnnxFile(FLAGS_explain, io));
  auto backend = MakeTimingBackend(FLAGS_device);
  for (Graph* g : {&a, &b}) g->info().permuted_views = backend->permuted_views();  // as the optimiser's
  MeasuredCostModel model(backend.get());
  if (!FLAGS_timing_cache.empty()) model.LoadCache(FLAGS_timing_cache);
  model.SetContext(a);
  // Times what the cache lacks of the model (nothing, with the search's
  // cache); the rewrite's keys are costed as the search costed them.
  const CalibrationReport cal = model.Calibrate(a);
  struct Share {
    int nodes_a = 0, nodes_b = 0;
    double ms_a = 0, ms_b = 0;
  };
  std::map<std::string, Share> per_op, per_key;
  auto add = [&](const Graph& g, bool is_a) {
    const std::vector<char> weight_only =
        backend->folds_constants() ? WeightOnlyNodes(g) : std::vector<char>(g.num_nodes(), 0);
    for (NodeId id = 0; id < g.num_nodes(); ++id) {
      if (weight_only[id]) continue;
      const double ms = model.NodeMs(g, id);
      for (Share* s : {&per_op[g.node(id).op], &per_key[NodeKeyText(g, id)]}) {
        (is_a ? s->nodes_a : s->nodes_b) += 1;
        (is_a ? s->ms_a : s->ms_b) += ms;
      }
    }
  };
  add(a, true);
  add(b, false);
  std::printf("%s: %d nodes, estimate %.4f ms (%d keys timed now, time base %.3f%s)\n", FLAGS_model.c_str(),
              a.num_nodes(), model.GraphCost(a), cal.new_keys, cal.time_base, cal.time_base_known ? "" : ", unknown");
  std::printf("%s: %d nodes, estimate %.4f ms\n", FLAGS_explain.c_str(), b.num_nodes(), model.GraphCost(b));
  std::printf("| op | nodes | ms | nodes (other) | ms (other) | difference |\n|---|---:|---:|---:|---:|---:|\n");
  for (const auto& [op, s] : per_op)
    std::printf("| %s | %d | %.4f | %d | %.4f | %+.4f |\n", op.c_str(), s.nodes_a, s.ms_a, s.nodes_b, s.ms_b,
                s.ms_b - s.ms_a);
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [key, s] : per_key) order.push_back({-std::abs(s.ms_b - s.ms_a), key});
  std::sort(order.begin(), order.end());
  std::printf("\nthe 25 cost keys whose share differs most:\n");
  for (size_t k = 0; k < order.size() && k < 25; ++k) {
    const Share& s = per_key[order[k].second];
    std::printf("%+.4f ms  %d x %.4f -> %d x %.4f  %s\n", s.ms_b - s.ms_a, s.nodes_a,
                s.nodes_a ? s.ms_a / s.nodes_a : 0.0, s.nodes_b, s.nodes_b ? s.ms_b / s.nodes_b : 0.0,
                order[k].second.c_str());
  }
  return 0;
}

// The calibration's whole run against the verdict's measurement of one
// model, interleaved (A B B A ...).
int CompareMethods() {
  if (!(FLAGS_min_sample_ms >= 0)) Fail("--min_sample_ms must be at least 0, got ", FLAGS_min_sample_ms);
  if (FLAGS_blocks < 0) Fail("--blocks must be at least 0, got ", FLAGS_blocks);
  if (FLAGS_self_pairs > 0) return SelfPairs();
  if (!FLAGS_explain.empty()) return Explain();
  ImportOptions io;
  io.input_shapes = ParseInputShapes(FLAGS_input_shape);
  Graph g = CutAtOpaque(ImportOnnxFile(FLAGS_model, io));
  auto backend = MakeTimingBackend("cpu");
  // The optimiser's settings for a graph of this run time.
  const double first_s = backend->TimeGraph(g, TimingOptions{}) / 1000;
  const int cal_runs = CalibrationRuns(first_s);
  const int pairs = VerdictPairs(first_s);
  TimingOptions verdict = VerdictTiming(pairs, TimingOptions{}.seed);
  verdict.samples = pairs;  // as the unchanged graph's measurement
  if (FLAGS_probe_repeat > 0) {
    Executor exec(g);
    std::vector<at::Tensor> inputs = RandomInputs(g, 1);
    at::Tensor a = at::randn({96, 96}), b = at::randn({96, 96}), big = at::randn({1 << 20}),
               big2 = at::randn({1 << 20});
    auto window = [](const std::function<void()>& f) {
      std::vector<double> ms;
      auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      while (std::chrono::steady_clock::now() < end) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      return Median(ms);
    };
    const std::function<void()> probe = [&] {
      if (FLAGS_probe == "stream") {
        at::Tensor c = big + big2;
        at::relu_(c);
        return;
      }
      for (int r = 0; r < 8; ++r) {
        at::Tensor c = at::mm(a, b);
        at::relu_(c);
      }
    };
    std::vector<double> model_ms, probe_ms;
    for (int k = 0; k < FLAGS_probe_repeat; ++k) {
      if (k > 0) std::this_thread::sleep_for(std::chrono::duration<double>(FLAGS_gap_s));
      double p0 = window(probe);
      struct rusage u0 {
      }, u1{};
      getrusage(RUSAGE_THREAD, &u0);
      double m = window([&] { exec.Run(inputs); });
      getrusage(RUSAGE_THREAD, &u1);
      double p1 = window(probe);
      model_ms.push_back(m);
      probe_ms.push_back((p0 + p1) / 2);
      std::printf(
          "window %d: model %.4f ms probe %.4f ms ratio %.3f (model's window: %ld minor, %ld major faults, %ld "
          "involuntary switches)\n",
          k, m, probe_ms.back(), m / probe_ms.back(), u1.ru_minflt - u0.ru_minflt, u1.ru_majflt - u0.ru_majflt,
          u1.ru_nivcsw - u0.ru_nivcsw);
      std::fflush(stdout);
    }
    int over_model = 0, over_ratio = 0;
    for (int k = 1; k < FLAGS_probe_repeat; ++k) {
      over_model += std::abs(model_ms[k] / model_ms[0] - 1) > 0.10;
      over_ratio += std::abs((model_ms[k] / probe_ms[k]) / (model_ms[0] / probe_ms[0]) - 1) > 0.10;
    }
    std::printf(
        "%s: against the first window, model time beyond 10%%: %d of %d; model/probe ratio beyond 10%%: %d of %d\n",
        FLAGS_model.c_str(), over_model, FLAGS_probe_repeat - 1, over_ratio, FLAGS_probe_repeat - 1);
    return 0;
  }
  if (FLAGS_statistic_repeat > 0) {
    // Which statistic of a window of runs follows the machine best: per
    // repeat, ~1 s of single runs (the calibration's whole-run samples),
    // --gap_s, then `pairs` samples of verdict.min_sample_ms (the
    // verdict's), each summarised three ways; the error of the first
    // against the second, per statistic.
    Executor exec(g);
    std::vector<at::Tensor> inputs = RandomInputs(g, 1);
    // Wall time, and this thread's CPU time beside it (one compute thread:
    // all the work runs here, so it leaves out other processes' time).
    std::vector<double>* cpu_out = nullptr;
    auto run_ms = [&](int reps) {
      const double c0 = ThreadCpuMs();
      auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) exec.Run(inputs);
      if (cpu_out) cpu_out->push_back((ThreadCpuMs() - c0) / reps);
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
    };
    const char* names[3] = {"median", "p10", "min"};
    auto summarise = [](std::vector<double> v, int k) {
      return k == 0 ? Median(v) : k == 1 ? Quantile(v, 0.1) : *std::min_element(v.begin(), v.end());
    };
    int over[3] = {0, 0, 0}, over_cpu = 0;
    double sum_abs[3] = {0, 0, 0}, sum_abs_cpu = 0;
    for (int k = 0; k < FLAGS_statistic_repeat; ++k) {
      std::vector<double> cal, ver, cal_cpu, ver_cpu;
      cpu_out = &cal_cpu;
      for (int i = 0; i < cal_runs; ++i) cal.push_back(run_ms(1));
      std::this_thread::sleep_for(std::chrono::duration<double>(FLAGS_gap_s));
      const int reps = std::max(1, static_cast<int>(verdict.min_sample_ms / std::max(first_s * 1000, 1e-3)) + 1);
      cpu_out = &ver_cpu;
      for (int i = 0; i < pairs; ++i) ver.push_back(run_ms(reps));
      cpu_out = nullptr;
      std::printf("repeat %d:", k);
      for (int s = 0; s < 3; ++s) {
        const double e = summarise(cal, s) / summarise(ver, s) - 1;
        over[s] += std::abs(e) > 0.10 ? 1 : 0;
        sum_abs[s] += std::abs(e);
        std::printf(" %s %.3f/%.3f (%+.1f%%)", names[s], summarise(cal, s), summarise(ver, s), 100 * e);
      }
      const double e_cpu = Median(cal_cpu) / Median(ver_cpu) - 1;
      over_cpu += std::abs(e_cpu) > 0.10 ? 1 : 0;
      sum_abs_cpu += std::abs(e_cpu);
      std::printf(" | thread CPU median %.3f/%.3f (%+.1f%%)", Median(cal_cpu), Median(ver_cpu), 100 * e_cpu);
      std::printf("\n");
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::duration<double>(FLAGS_gap_s));
    }
    for (int s = 0; s < 3; ++s)
      std::printf("%s: %s beyond 10%%: %d of %d, mean |error| %.2f%%\n", FLAGS_model.c_str(), names[s], over[s],
                  FLAGS_statistic_repeat, 100 * sum_abs[s] / FLAGS_statistic_repeat);
    std::printf("%s: thread CPU median beyond 10%%: %d of %d, mean |error| %.2f%%\n", FLAGS_model.c_str(), over_cpu,
                FLAGS_statistic_repeat, 100 * sum_abs_cpu / FLAGS_statistic_repeat);
    return 0;
  }
  if (FLAGS_repeat > 0) {
    // The noise floor of any estimate on this machine: the verdict's own
    // measurement of one graph, repeated --gap_s apart, against itself.
    std::vector<double> ms;
    int over = 0;
    double worst = 1;
    for (int k = 0; k < FLAGS_repeat; ++k) {
      if (k > 0) std::this_thread::sleep_for(std::chrono::duration<double>(FLAGS_gap_s));
      ms.push_back(backend->TimeGraph(g, verdict));
      std::printf("repeat %d: measured %.3f ms\n", k, ms.back());
      std::fflush(stdout);
      if (k == 0) continue;
      const double r = ms[k] / ms[k - 1];
      over += std::abs(r - 1) > 0.10 ? 1 : 0;
      if (std::abs(r - 1) > std::abs(worst - 1)) worst = r;
    }
    std::printf(
        "%s: %d measurements %.0f s apart, %.3f to %.3f ms; consecutive ratios beyond 10%%: %d of %d (largest %.3f)\n",
        FLAGS_model.c_str(), FLAGS_repeat, FLAGS_gap_s, *std::min_element(ms.begin(), ms.end()),
        *std::max_element(ms.begin(), ms.end()), over, FLAGS_repeat - 1, worst);
    return 0;
  }
  std::vector<double> cal, measured;
  for (int k = 0; k < FLAGS_method_pairs; ++k) {
    for (int half = 0; half < 2; ++half) {
      if ((half == 0) == (k % 2 == 0)) {
        cal.push_back(backend->TimeNodesInContext(g, cal_runs, TimingOptions{}).run_ms);
      } else {
        measured.push_back(backend->TimeGraph(g, verdict));
      }
    }
    std::printf("pair %d: calibration run %.3f ms, measured %.3f ms\n", k, cal.back(), measured.back());
    std::fflush(stdout);
  }
  RatioInterval r = PairedRatio(measured, cal);
  std::printf("%s: %d nodes, calibration %d runs; measured / calibration run: %.4f [%.4f, %.4f] (%.0f%%, %d pairs)\n",
              FLAGS_model.c_str(), g.num_nodes(), cal_runs, r.median, r.lo, r.hi, 100 * r.confidence, r.n);
  return 0;
}

int Run() {
  SetComputeThreads(FLAGS_threads);
  SetSteadyAllocation();
  if (!FLAGS_model.empty()) return CompareMethods();
  std::vector<std::string> models;
  std::stringstream ss(FLAGS_models);
  for (std::string m; std::getline(ss, m, ',');) models.push_back(m);
  if (models.empty()) models = zoo::ModelNames();
  auto backend = MakeTimingBackend("cpu");
  // Isolated: per-op times alone (the pre-calibration model); calibrated:
  // the model after timing the graph's nodes in context (what the optimiser
  // uses). Each model on a fresh cache; measured: median of paired runs.
  std::printf(
      "| model | nodes | distinct op keys | isolated estimate (ms) | calibrated estimate (ms) | measured (ms) | "
      "isolated error | calibrated error |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& name : models) {
    Graph g = zoo::Build(name, 1);
    MeasuredCostModel model(backend.get());
    double isolated = model.GraphCost(g);
    size_t keys = model.cache_size();
    model.Calibrate(g);
    double calibrated = model.GraphCost(g);
    TimingOptions o;
    double measured = Median(backend->TimePaired(g, g, FLAGS_runs, o).wall_a);
    if (FLAGS_profile) {
      Executor e(g);
      auto in = RandomInputs(g, 1);
      std::vector<double> sum(g.num_nodes(), 0.0), t;
      for (int r = 0; r < 5; ++r) {
        e.Run(in, &t);
        if (r >= 2)
          for (int i = 0; i < g.num_nodes(); ++i) sum[i] += t[i] / 3;
      }
      std::map<std::string, std::pair<double, double>> by_op;
      for (int i = 0; i < g.num_nodes(); ++i) {
        by_op[g.node(i).op].first += sum[i];
        by_op[g.node(i).op].second += model.NodeCost(g, i).ms;
      }
      for (auto& [op, p] : by_op) std::printf("  %s in-graph %.2f model %.2f\n", op.c_str(), p.first, p.second);
    }
    std::printf("| %s | %d | %zu | %.2f | %.2f | %.2f | %+.1f%% | %+.1f%% |\n", name.c_str(), g.num_nodes(), keys,
                isolated, calibrated, measured, 100 * (isolated - measured) / measured,
                100 * (calibrated - measured) / measured);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) { return rlflow::cli::Main(argc, argv, "cost_bench [--models=a,b]", rlflow::Run); }

// The optimiser on every zoo model (C++-built and torch-exported) and on the
// real-model corpus (//zoo:real_models, at its manifest's --input_shape): op counts,
// cost-model estimate vs measured end-to-end time, speedups on our executor
// and in ONNX Runtime, and search times of taso and greedy. Prints a
// Markdown table (the README's). Runs the real optimiser binary with its
// default settings plus --search, a shared timing cache, and
// --force_optimised so that the optimised graph is measured in ORT even
// where our executor did not find it faster.
//
// A second table optimises with --device=ort (cost model and verdict
// measured in ONNX Runtime).
//
//   ./bazelw run //benchmarks:optimise_table [-- --models=resnet50 --sources=cpp,torch,real --devices=cpu,ort]
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/cli.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/onnx_io.h"
#include "core/strings.h"
#include "core/subprocess.h"
#include "runtime/executor.h"
#include "runtime/ort_backend.h"
#include "runtime/ort_testing.h"
#include "runtime/stats.h"
#include "zoo/zoo.h"

DEFINE_string(models, "", "comma-separated models (default: all of each source)");
DEFINE_string(sources, "cpp,torch,real",
              "model sources: cpp (C++ builders), torch (torch.onnx exports), real (the real-model corpus, "
              "//zoo:real_models, each at its manifest's --input_shape)");
DEFINE_int32(ort_runs, 20, "interleaved pairs of ONNX Runtime runs per model (median ratio with a 95% interval)");
DEFINE_string(extra_args, "", "extra optimiser flags for every search (e.g. --budget=200)");
DEFINE_string(chart, "", "also draw the speedups with their 95% intervals as a PNG bar chart (gnuplot) to this path");
DEFINE_string(devices, "cpu,ort",
              "tables to print: cpu (optimised for the executor, also timed in ONNX Runtime), "
              "ort (optimised with --device=ort: cost model and verdict in ONNX Runtime)");

namespace rlflow {
namespace {

std::string Runfile(const std::string& rel) {
  std::string p = FindRunfile(rel, gflags::GetArgv0());
  if (p.empty()) Fail("runfile ", rel, " not found");
  return p;
}

// Absolute: the optimiser resolves relative paths against the user's directory.
std::string Absolute(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) Fail("cannot resolve ", p);
  return buf;
}

// Runs the optimiser; returns its JSON report.
using Json = nlohmann::json;

// Runs the optimiser; its JSON report, parsed.
Json Optimise(const std::string& model, const std::string& search, const std::string& out, const std::string& dir,
              const std::string& flags = "--force_optimised") {
  std::string report = out + ".json";
  // Flags are separated by spaces (no shell: a value is passed as it is).
  std::vector<std::string> args = {Runfile("optimiser/optimiser"), "--model=" + model,
                                   "--search=" + search,           "--output=" + out,
                                   "--report=" + report,           "--timing_cache=" + dir + "/timing-cache.txt"};
  for (const std::string& more : {flags, FLAGS_extra_args})
    for (const std::string& f : SplitList(more, ' ')) args.push_back(f);
  if (RunProgram(args, out + ".log") != 0) Fail("optimiser failed on ", model, " (", search, "): see ", out, ".log");
  return Json::parse(ReadFile(report));
}

int Rewrites(const Json& report) { return static_cast<int>(report["rules"]["sequence"].size()); }

// The report's verdict: its outcome and "median [lo, hi]" of the wall-time speedup.
struct Verdict {
  std::string outcome = "unchanged", speedup = "1.000x (same graph)";
};
// If branches the branches stage optimised (the outer graph around them
// may be unchanged: a merged decoder is one If).
int OptimisedBranches(const Json& report) {
  int n = 0;
  if (report.contains("branches"))
    for (const Json& b : report["branches"]) n += b["outcome"] == "optimised" ? 1 : 0;
  return n;
}
Verdict ReadVerdict(const Json& report) {
  Verdict v;
  v.outcome = report["verdict"]["outcome"].get<std::string>();
  if (v.outcome == "unchanged" && OptimisedBranches(report) > 0) {
    // The model with its optimised branches against the model as it came,
    // per value of the If's condition (the stage's check in ORT).
    // "2 If branches optimised", "1 Loop body optimised".
    std::map<std::string, int> by_op;
    for (const Json& b : report["branches"])
      if (b["outcome"] == "optimised") ++by_op[b.value("op", std::string("If"))];
    v.outcome.clear();
    for (const auto& [op, n] : by_op)
      v.outcome += (v.outcome.empty() ? "" : ", ") + std::to_string(n) + " " + op +
                   (op == "If" ? (n == 1 ? " branch" : " branches") : (n == 1 ? " body" : " bodies"));
    v.outcome += " optimised";
    v.speedup.clear();
    for (const Json& c : report["branches_check"]["checks"]) {
      char text[160];
      const std::string condition = c["condition"].get<std::string>();
      std::snprintf(text, sizeof text, "%s%.3fx [%.3f, %.3f]%s", v.speedup.empty() ? "" : "; ",
                    c["speedup"].get<double>(), c["low"].get<double>(), c["high"].get<double>(),
                    condition.empty() ? "" : (" (" + condition + ")").c_str());
      v.speedup += text;
    }
    if (v.speedup.empty()) v.speedup = "not measured in the model";
    return v;
  }
  if (v.outcome == "unchanged") return v;
  const Json& wall = report["verdict"]["wall"];
  char text[96];
  std::snprintf(text, sizeof text, "%.3fx [%.3f, %.3f]", wall["median"].get<double>(), wall["lo"].get<double>(),
                wall["hi"].get<double>());
  v.speedup = text;
  // The verdict at the check's second binding of the symbolic dimensions:
  // its speedup after the first; a result slower there where that was
  // required is not written (the original is).
  if (report["verdict"].contains("second_binding") && report["verdict"]["second_binding"]["measured"].get<bool>()) {
    const Json& second = report["verdict"]["second_binding"];
    std::snprintf(text, sizeof text, "; %.3fx [%.3f, %.3f] at ", second["wall"]["median"].get<double>(),
                  second["wall"]["lo"].get<double>(), second["wall"]["hi"].get<double>());
    v.speedup += text + second["shapes"].get<std::string>();
    if (second["required"].get<bool>() && second["outcome"] == "slower")
      v.outcome += ", slower at the second binding: original written";
  }
  return v;
}

// The chart's rows: per model, the executor's and ONNX Runtime's speedup
// (median and 95% interval; NaN where not measured).
struct ChartRow {
  std::string label;
  double cpu[3] = {std::nan(""), std::nan(""), std::nan("")};
  double ort[3] = {std::nan(""), std::nan(""), std::nan("")};
};
std::vector<ChartRow>& Chart() {
  static std::vector<ChartRow> rows;
  return rows;
}
ChartRow& ChartRowFor(const std::string& label) {
  for (ChartRow& r : Chart())
    if (r.label == label) return r;
  Chart().push_back({label});
  return Chart().back();
}
// The verdict's wall-time speedup (1 where the graph was unchanged).
void VerdictInterval(const Json& report, double* out) {
  if (report["verdict"]["outcome"].get<std::string>() == "unchanged" && OptimisedBranches(report) > 0) {
    // The slowest value of the condition (the model check's).
    out[0] = out[1] = out[2] = 1.0;
    bool first = true;
    for (const Json& c : report["branches_check"]["checks"])
      if (first || c["speedup"].get<double>() < out[0]) {
        first = false;
        out[0] = c["speedup"].get<double>();
        out[1] = c["low"].get<double>();
        out[2] = c["high"].get<double>();
      }
    return;
  }
  if (report["verdict"]["outcome"].get<std::string>() == "unchanged") {
    out[0] = out[1] = out[2] = 1.0;
    return;
  }
  const Json& wall = report["verdict"]["wall"];
  out[0] = wall["median"].get<double>();
  out[1] = wall["lo"].get<double>();
  out[2] = wall["hi"].get<double>();
}

// Writes the chart with gnuplot (atomically: a temporary file renamed).
void WriteChart(const std::string& path) {
  const std::string data = path + ".tmp.dat", script = path + ".tmp.gp", png = path + ".tmp.png";
  std::ostringstream d;
  auto num = [](double x) { return std::isnan(x) ? std::string("NaN") : std::to_string(x); };
  for (const ChartRow& r : Chart())
    d << '"' << r.label << "\" " << num(r.cpu[0]) << ' ' << num(r.cpu[1]) << ' ' << num(r.cpu[2]) << ' '
      << num(r.ort[0]) << ' ' << num(r.ort[1]) << ' ' << num(r.ort[2]) << '\n';
  WriteFileAtomically(data, d.str());
  bool has_cpu = false, has_ort = false;
  for (const ChartRow& r : Chart()) {
    has_cpu = has_cpu || !std::isnan(r.cpu[0]);
    has_ort = has_ort || !std::isnan(r.ort[0]);
  }
  std::string plot;
  if (has_cpu) plot += "'" + data + "' using 2:3:4:xtic(1) title 'rlflow executor'";
  if (has_ort)
    plot += std::string(plot.empty() ? "'" + data + "'" : ", ''") + " using 5:6:7" + (has_cpu ? "" : ":xtic(1)") +
            " title 'ONNX Runtime (level all)'";
  if (plot.empty()) Fail("--chart: no speedup was measured");
  std::ostringstream gp;
  gp << "set terminal png noenhanced size " << std::max<size_t>(900, 110 * Chart().size() + 250) << ",560\n"
     << "set output '" << png << "'\n"
     << "set title 'Speedup of the optimised graph (median of interleaved pairs, 95% interval, 1 thread; written only "
        "where faster)'\n"
     << "set ylabel 'speedup (x)'\nset datafile missing 'NaN'\nset grid ytics\nset bmargin 9\nset rmargin 12\n"
     << "set style data histograms\nset style histogram errorbars gap 2 lw 1\nset style fill solid 0.6 border -1\n"
     << "set xtics rotate by -30 scale 0\nset yrange [0.8:*]\nset key top right\n"
     << "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2\n"
     << "plot " << plot << "\n";
  WriteFileAtomically(script, gp.str());
  const int rc = RunProgram({"gnuplot", script}, path + ".tmp.log");
  std::remove(data.c_str());
  std::remove(script.c_str());
  std::remove((path + ".tmp.log").c_str());
  if (rc != 0 || std::rename(png.c_str(), path.c_str()) != 0) {
    std::remove(png.c_str());
    Fail("--chart: gnuplot failed (exit ", rc, ") or '", path, "' cannot be written");
  }
}

// A number of the report (NaN where it was written as null).
double Number(const Json& value) { return value.is_number() ? value.get<double>() : std::nan(""); }

// The real-model corpus's manifest: name -> --input_shape.
std::map<std::string, std::string> RealModels() {
  std::map<std::string, std::string> out;
  std::istringstream in(ReadFile(Runfile("zoo/real_models/models.txt")));
  std::string name, shape, other;
  while (in >> name >> shape >> other) out[name] = shape;
  return out;
}

// The models of a source: --models where given (those the source has), else all.
std::vector<std::string> ModelsOf(const std::string& source, const std::vector<std::string>& wanted) {
  std::vector<std::string> all;
  if (source == "real") {
    for (const auto& [name, shape] : RealModels()) all.push_back(name);
  } else {
    all = zoo::ModelNames();
  }
  if (wanted.empty()) return all;
  std::vector<std::string> out;
  for (const std::string& m : wanted)
    if (std::find(all.begin(), all.end(), m) != all.end()) out.push_back(m);
  return out;
}

// Optimiser flags a source's model needs (the corpus: its input shape).
std::string ShapeFlags(const std::string& source, const std::string& m) {
  return source == "real" ? " --input_shape=" + RealModels().at(m) : "";
}

std::string Original(const std::string& source, const std::string& m, const std::string& dir) {
  if (source == "torch") return Absolute(Runfile("zoo/torch_zoo/" + m + ".onnx"));
  if (source == "real") return Absolute(Runfile("zoo/real_models/" + m + ".onnx"));
  std::string path = dir + "/" + m + ".onnx";
  if (!FileExists(path)) WriteOnnxFile(zoo::Build(m, 1), path);
  return path;
}

// --device=ort: what a user deploying on ONNX Runtime gets (no
// --force_optimised: the original is written unless ORT runs the result faster).
void OrtTable(const std::vector<std::string>& models, const std::string& dir) {
  std::printf(
      "\n| model | source | rewrites applied | estimate error (original / optimised) | predicted speedup | "
      "ORT speedup [95%% interval] | verdict | taso search (s) |\n");
  std::printf("|---|---|---:|---:|---:|---:|---|---:|\n");
  for (const std::string& source : SplitList(FLAGS_sources)) {
    for (const std::string& m : ModelsOf(source, models)) {
      std::string original = Original(source, m, dir);
      LOG(INFO) << m << " (" << source << "): taso --device=ort";
      Json r = Optimise(original, "taso", dir + "/" + m + "." + source + ".ort.onnx", dir,
                        "--device=ort" + ShapeFlags(source, m));
      Verdict v = ReadVerdict(r);
      VerdictInterval(r, ChartRowFor(m + " (" + source + ")").ort);
      std::printf("| %s | %s | %d | %+.1f%% / %+.1f%% | %.3fx | %s | %s | %.1f |\n", m.c_str(), source.c_str(),
                  Rewrites(r), 100 * Number(r["before"]["estimate_error"]), 100 * Number(r["after"]["estimate_error"]),
                  Number(r["estimated_speedup"]), v.speedup.c_str(), v.outcome.c_str(), Number(r["search"]["time_s"]));
      std::fflush(stdout);
    }
  }
}

int Run() {
  std::vector<std::string> models = SplitList(FLAGS_models);
  for (const std::string& s : SplitList(FLAGS_sources))
    if (s != "cpp" && s != "torch" && s != "real") Fail("--sources: unknown source '", s, "' (cpp, torch, real)");
  std::string dir = testing::MakeTempDir("optimise_table_");
  std::vector<std::string> devices = SplitList(FLAGS_devices);
  for (const std::string& d : devices)
    if (d != "cpu" && d != "ort") Fail("--devices: unknown table '", d, "' (cpu, ort)");
  if (!FLAGS_chart.empty()) CheckWritablePath(ResolveUserPath(FLAGS_chart), "--chart");
  auto chart = [&] {
    if (FLAGS_chart.empty()) return 0;
    WriteChart(ResolveUserPath(FLAGS_chart));
    std::printf("\nchart: %s\n", ResolveUserPath(FLAGS_chart).c_str());
    return 0;
  };
  if (std::find(devices.begin(), devices.end(), "cpu") == devices.end()) {
    OrtTable(models, dir);
    return chart();
  }
  std::printf(
      "| model | source | rewrites applied | BatchNorms before -> after | ops before -> after | estimate error "
      "(original / optimised) | predicted speedup | executor speedup [95%% interval] | verdict | ORT speedup "
      "[95%% interval] | taso search (s) | greedy speedup |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n");
  for (const std::string& source : SplitList(FLAGS_sources)) {
    for (const std::string& m : ModelsOf(source, models)) {
      std::string original = Original(source, m, dir);
      const std::string shape = ShapeFlags(source, m);
      LOG(INFO) << m << " (" << source << "): taso";
      std::string taso_out = dir + "/" + m + "." + source + ".taso.onnx";
      Json taso = Optimise(original, "taso", taso_out, dir, "--force_optimised" + shape);
      LOG(INFO) << m << " (" << source << "): greedy";
      Json greedy =
          Optimise(original, "greedy", dir + "/" + m + "." + source + ".greedy.onnx", dir, "--force_optimised" + shape);
      ImportOptions at;
      if (source == "real") at.input_shapes = ParseInputShapes(RealModels().at(m));
      at.type_oracle = [](const std::string& bytes, const std::vector<std::string>& names) {
        return OrtTensorTypes(bytes, names, 1);
      };
      Graph g = ImportOnnxFile(original, at);
      std::vector<at::Tensor> inputs = RandomInputs(g, 1);
      std::vector<std::pair<std::string, at::Tensor>> named;
      for (size_t k = 0; k < inputs.size(); ++k) named.push_back({g.value(g.inputs()[k]).name, inputs[k]});
      LOG(INFO) << m << " (" << source << "): ONNX Runtime";
      testing::OrtPairedTimes ort = testing::TimeOnnxRuntime(original, taso_out, named, FLAGS_ort_runs);
      RatioInterval ort_speedup = PairedRatio(ort.a, ort.b);
      auto count = [](const Json& side, const std::string& op) {
        return side["op_counts"].contains(op) ? side["op_counts"][op].get<double>() : 0.0;
      };
      int rewrites = Rewrites(taso);
      Verdict v = ReadVerdict(taso);
      ChartRow& row = ChartRowFor(m + " (" + source + ")");
      VerdictInterval(taso, row.cpu);
      row.ort[0] = ort_speedup.median;
      row.ort[1] = ort_speedup.lo;
      row.ort[2] = ort_speedup.hi;
      std::printf(
          "| %s | %s | %d | %.0f -> %.0f | %.0f -> %.0f | %+.1f%% / %+.1f%% | %.3fx | %s | %s | "
          "%.3fx [%.3f, %.3f] | %.1f | %.3fx |\n",
          m.c_str(), source.c_str(), rewrites, count(taso["before"], "BatchNormalization"),
          count(taso["after"], "BatchNormalization"), Number(taso["before"]["nodes"]), Number(taso["after"]["nodes"]),
          100 * Number(taso["before"]["estimate_error"]), 100 * Number(taso["after"]["estimate_error"]),
          Number(taso["estimated_speedup"]), v.speedup.c_str(), v.outcome.c_str(), ort_speedup.median, ort_speedup.lo,
          ort_speedup.hi, Number(taso["search"]["time_s"]), Number(greedy["speedup"]));
      std::fflush(stdout);
    }
  }
  if (std::find(devices.begin(), devices.end(), "ort") != devices.end()) OrtTable(models, dir);
  return chart();
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(argc, argv, "optimise_table [--models=a,b] [--sources=cpp,torch,real]", rlflow::Run);
}

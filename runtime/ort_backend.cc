#include "runtime/ort_backend.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <fcntl.h>
#include <onnx/onnx_pb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "core/graph_builder.h"
#include "core/onnx_io.h"
#include "core/op_registry.h"
#include "core/ops/kernel.h"
#include "core/subprocess.h"
#include "runtime/executor.h"
#include "runtime/stats.h"

namespace rlflow {
namespace {

using Json = nlohmann::json;

// A paired measurement is timed in this many pairs of ORT sessions (at
// least 5 pairs each; ort_run.js): two sessions of one model sit in memory
// differently, and a single pair of them is a sample of one
// (BlockedPairedRatio).
constexpr int kSessionPairs = 4;

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) return "";
  return buf;
}

std::string DTypeString(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: Fail("ONNX Runtime backend: unsupported input type ", c10::toString(t));
  }
}

// Removes a temporary directory and what is in it (never throws).
void RemoveDir(const std::string& dir) {
  if (dir.empty()) return;
  try {
    RemoveTree(dir);
  } catch (const Error&) {
  }
}

// The ORT name of a node or value the export gave it: "rlflow_n<id>" or
// "rlflow_v<id>" somewhere in `name` (ORT derives fused and re-laid-out
// nodes' names from these, e.g. "rlflow_v12_nchwc").
bool FindTagged(const std::string& name, const char* tag, int* id) {
  size_t at = name.find(tag);
  while (at != std::string::npos) {
    size_t p = at + std::strlen(tag);
    size_t q = p;
    while (q < name.size() && std::isdigit(static_cast<unsigned char>(name[q]))) ++q;
    if (q > p && q - p < 10) {
      *id = std::stoi(name.substr(p, q - p));
      return true;
    }
    at = name.find(tag, at + 1);
  }
  return false;
}

// ORT kernels that run an rlflow operator under another name.
bool RunsOp(const std::string& ort_op, const std::string& op) {
  if (ort_op.empty() || ort_op == op || ort_op.find(op) != std::string::npos) return true;
  return ort_op == "Gemm" && op == "MatMul";  // MatMul + Add -> Gemm
}

// write(2) to a pipe whose reader may have exited: EPIPE instead of a
// process-killing SIGPIPE, without changing the process's signal handling
// (SIGPIPE is blocked in this thread for the call, and a pending one that
// the write raised is consumed).
ssize_t WriteNoSigpipe(int fd, const void* data, size_t size) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  ssize_t n = ::write(fd, data, size);
  int saved = errno;
  if (n < 0 && saved == EPIPE && !was_pending) {
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return n;
}

class Server {
 public:
  Server(const OrtOptions& o, const std::string& dir) : dir_(dir) {
    std::string script = o.script.empty() ? OrtRunScript() : o.script, modules = OrtNodeModules();
    const std::string& level = o.level;
    ProgramIo io;
    io.err = dir_ + "/server.log";
    io.env["NODE_PATH"] = modules;
    PipedProcess child = StartPiped({"node", script, "--serve", std::to_string(o.threads), level}, io);
    pid_ = child.pid;
    to_ = child.to;
    from_ = child.from;
    Json hello = ReadReply("starting the ONNX Runtime server");
    if (!hello.value("ready", false)) Fail("ONNX Runtime backend: the server did not start: ", hello.dump());
    version_ = hello.value("version", "?");
  }
  ~Server() {
    if (to_ >= 0) {
      const char quit[] = "{\"op\":\"quit\"}\n";
      (void)WriteNoSigpipe(to_, quit, sizeof(quit) - 1);
      ::close(to_);
    }
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0) {
      int status = 0;
      for (int k = 0; k < 50; ++k) {  // up to 0.5 s, then kill
        if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
        ::usleep(10000);
      }
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
  }
  const std::string& version() const { return version_; }

  Json Request(const Json& q, const std::string& what) {
    std::string line = q.dump() + "\n";
    size_t off = 0;
    while (off < line.size()) {
      ssize_t n = WriteNoSigpipe(to_, line.data() + off, line.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) Fail("ONNX Runtime backend: the server exited (", ServerLog(), ") while ", what);
      off += static_cast<size_t>(n);
    }
    Json r = ReadReply(what);
    if (r.contains("error")) Fail("ONNX Runtime failed ", what, ": ", r["error"].get<std::string>());
    return r;
  }

 private:
  std::string ServerLog() const {
    std::string log = FileExists(dir_ + "/server.log") ? ReadFile(dir_ + "/server.log") : "";
    size_t at = log.rfind("ort_run: ");
    std::string line = FirstLine(at == std::string::npos ? log : log.substr(at));
    return line.empty() ? "no message" : line;
  }
  Json ReadReply(const std::string& what) {
    for (;;) {
      size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        Json r = Json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (r.is_discarded()) Fail("ONNX Runtime backend: unreadable reply while ", what, ": ", FirstLine(line));
        return r;
      }
      pollfd p{from_, POLLIN, 0};
      int ready = ::poll(&p, 1, 900 * 1000);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) Fail("ONNX Runtime backend: no reply in 900 s while ", what);
      char chunk[65536];
      ssize_t n = ::read(from_, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (version_.empty())
          Fail("ONNX Runtime backend: the server did not start (", ServerLog(),
               "): is Node.js installed and onnxruntime-node in ", OrtNodeModules(), "?");
        Fail("ONNX Runtime backend: the server exited (", ServerLog(), ") while ", what);
      }
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  std::string dir_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buf_, version_;
};

class OrtBackend : public TimingBackend {
 public:
  explicit OrtBackend(const OrtOptions& o) : options_(o) {
    if (o.threads < 0) Fail("ONNX Runtime backend: threads must be >= 0");
    if (o.level != "disabled" && o.level != "basic" && o.level != "extended" && o.level != "all")
      Fail("ONNX Runtime backend: unknown graph optimisation level '", o.level, "' (disabled, basic, extended, all)");
    dir_ = MakeTempDir("rlflow-ort-");
    try {
      server_ = std::make_unique<Server>(o, dir_);
    } catch (...) {
      RemoveDir(dir_);
      throw;
    }
  }
  ~OrtBackend() override {
    server_.reset();
    RemoveDir(dir_);
  }

  std::string name() const override { return "ort"; }
  bool context_sensitive() const override { return true; }
  // Constant folding is one of level basic's transformers.
  bool folds_constants() const override { return options_.level != "disabled"; }
  // Level basic already fuses (Conv with the Add, Mul or BatchNormalization
  // after it); extended and all fuse much more.
  bool fuses_nodes() const override { return options_.level != "disabled"; }
  bool permuted_views() const override { return false; }
  // Every session pair with its 5 pairs (ort_run.js gives fewer pairs fewer
  // session pairs): swin_t (torchvision, 76 ms in ORT) had 10 pairs in 2
  // session pairs, and its verdict's interval was [0.770, 1.473].
  int min_paired_pairs() const override { return 5 * kSessionPairs; }
  // The cache's keys begin with it. "/tb2": in-context timings recorded
  // since a model's time base is its whole run's (MeasuredCostModel's
  // RunTimeBase); those recorded before were scaled by their keys' derived
  // times, up to 2.6x off on a 0.25 ms model, and are not read. "/tb3":
  // since a node fused into a kernel that writes ORT's own tensors (Conv +
  // Relu in the blocked layout) is found fused; before, its key was
  // recorded as free wherever it ran. "/tb4": a node reading a weight
  // computed from weights (Split(W), Mul(s, W)) is timed with it an
  // initializer, as it runs once folded (ExtractNode); before, an input
  // (ORT prepacks no MatMul weight that is an input: 1.5x the time).
  std::string fingerprint() const override {
    return "ort" + server_->version() + "/t" + std::to_string(options_.threads) + "/" + options_.level + "/tb4";
  }

  double TimeGraph(const Graph& graph, const TimingOptions& o) override { return Median(TimeGraphRuns(graph, o)); }

  std::vector<double> TimeGraphRuns(const Graph& graph, const TimingOptions& o) override {
    Files f(this);
    std::string model = f.Model(graph), inputs = f.Inputs(graph, o.seed);
    Json r = server_->Request({{"op", "time"},
                               {"model", model},
                               {"inputs", inputs},
                               {"warmup", std::max(o.warmup, 1)},
                               {"samples", std::max(o.samples, 1)},
                               {"min_ms", o.min_sample_ms},
                               {"max_ms", o.max_total_ms}},
                              "timing a graph");
    return r.at("samples").get<std::vector<double>>();  // ort_run.js: every sample, in the order taken
  }

  PairedTimes TimePaired(const Graph& a, const Graph& b, int pairs, const TimingOptions& o) override {
    Files f(this);
    std::string ma = f.Model(a), mb = f.Model(b), inputs = f.Inputs(a, o.seed);
    return Paired(ma, mb, inputs, pairs, o, "timing two graphs against each other");
  }

  // The models at paths `ma` and `mb` timed against each other (ort_run.js's
  // "paired") on the inputs in `inputs` (Files::Inputs).
  PairedTimes Paired(const std::string& ma, const std::string& mb, const std::string& inputs, int pairs,
                     const TimingOptions& o, const char* what) {
    Json r = server_->Request({{"op", "paired"},
                               {"a", ma},
                               {"b", mb},
                               {"inputs", inputs},
                               {"pairs", std::max(pairs, 1)},
                               {"warmup", std::max(o.warmup, 1)},
                               {"min_ms", o.min_sample_ms},
                               {"blocks", o.blocks > 0 ? o.blocks : kSessionPairs}},
                              what);
    PairedTimes t;
    t.wall_a = r.at("wall_a").get<std::vector<double>>();
    t.wall_b = r.at("wall_b").get<std::vector<double>>();
    t.cpu_a = r.at("cpu_a").get<std::vector<double>>();
    t.cpu_b = r.at("cpu_b").get<std::vector<double>>();
    t.cpu_clock = "process";  // the Node.js process: ORT's threads and the caller's
    if (r.contains("blocks")) t.blocks = r.at("blocks").get<std::vector<int>>();
    return t;
  }

  PairedTimes TimePairedFiles(const std::string& a, const std::string& b, const Graph& inputs, int pairs,
                              const TimingOptions& o) override {
    Files f(this);
    return Paired(a, b, f.Inputs(inputs, o.seed), pairs, o, "timing two model files against each other");
  }
  bool times_files() const override { return true; }

  InContextTimes TimeNodesInContext(const Graph& g, int runs, const TimingOptions& o) override {
    Graph named = Tagged(g);
    Files f(this);
    std::string model = f.Model(named), inputs = f.Inputs(named, o.seed);
    const std::string optimized = f.Optimized();
    Json r = server_->Request({{"op", "profile"},
                               {"model", model},
                               {"inputs", inputs},
                               {"runs", std::max(runs, 1)},
                               {"warmup", std::max(o.warmup, 1)},
                               {"prefix", dir_ + "/profile" + std::to_string(++seq_)},
                               {"optimized", optimized}},
                              "profiling a graph");
    // ORT's node name -> what it reads and writes, in its optimised graph
    // (weights apart).
    std::unordered_map<std::string, OrtNodeIO> ort_nodes;
    // Its layout conversions (ReorderInput/ReorderOutput of the blocked
    // layout): charged to the node whose value they hand on, but no node of
    // the graph runs inside them (what they read is ORT's own tensor, so a
    // walk from one would not stop at the kernel before it).
    std::set<std::string> layout_only;
    {
      onnx::ModelProto opt;
      std::ifstream in(optimized, std::ios::binary);
      if (in && opt.ParseFromIstream(&in))
        for (const auto& n : opt.graph().node()) {
          ort_nodes[n.name()] = OrtNodeIO{std::vector<std::string>(n.input().begin(), n.input().end()),
                                          std::vector<std::string>(n.output().begin(), n.output().end())};
          if (n.op_type() == "ReorderInput" || n.op_type() == "ReorderOutput") layout_only.insert(n.name());
        }
    }
    std::vector<double> run_ms = r.at("run_ms").get<std::vector<double>>();
    const Json& kernels = r.at("kernels");
    if (run_ms.empty() || kernels.size() != run_ms.size()) Fail("ONNX Runtime backend: the profile has no timed runs");
    const ProfilerCost profiler = Profiler(o);
    std::vector<std::vector<double>> samples(g.num_nodes());
    std::vector<char> ran(g.num_nodes(), 0);
    std::unordered_map<std::string, NodeId> attributed;  // ORT node name -> rlflow node
    double events = 0;                                   // kernel events per run
    for (const Json& run : kernels) {
      std::vector<double> ms(g.num_nodes(), 0.0);
      std::vector<int> count(g.num_nodes(), 0);
      events += static_cast<double>(run.size()) / static_cast<double>(kernels.size());
      for (const Json& k : run) {
        OrtKernel kernel{k.at("name").get<std::string>(), k.at("op").get<std::string>(), k.at("ms").get<double>(), {}};
        auto it = attributed.find(kernel.name);
        if (it == attributed.end()) {
          auto io = ort_nodes.find(kernel.name);
          if (io != ort_nodes.end()) kernel.outputs = io->second.outputs;
          it = attributed.emplace(kernel.name, AttributeOrtKernel(named, kernel)).first;
        }
        if (it->second != kNoNode) {
          ms[it->second] += kernel.ms;
          ++count[it->second];
        }
      }
      // Each kernel event carries the profiler's own cost (about 1.3 us
      // here, for kernels of 0.2 us and more): most of a small kernel's
      // event. Scaled down in proportion instead, a graph of many small
      // kernels overcharged them against its big ones: a written-out layer
      // norm (six kernels) was priced 3x what fusing it saves.
      for (NodeId id = 0; id < g.num_nodes(); ++id) {
        ran[id] |= count[id] > 0;
        samples[id].push_back(std::max(0.0, ms[id] - count[id] * profiler.per_event_ms));
      }
    }
    InContextTimes t = SummariseInContext(samples, run_ms);
    // Nodes ORT ran inside another node's kernel: free only next to it.
    std::vector<std::pair<NodeId, OrtNodeIO>> fused;
    for (const auto& [name, node] : attributed) {
      auto io = ort_nodes.find(name);
      if (node == kNoNode || io == ort_nodes.end() || layout_only.count(name)) continue;
      OrtNodeIO kernel_io = io->second;
      kernel_io.name = name;
      fused.push_back({node, std::move(kernel_io)});
    }
    FindOrtFusions(named, ran, fused, &t.fused_into, &t.fused_distance);
    // ORT's profiler costs time per kernel event: a profiled run of a graph
    // of many small kernels is several times slower than a plain one (a
    // small Swin: 3 ms plain, 20 ms profiled), which would inflate the
    // per-node overhead derived from it too. The run time is the plain
    // run's, timed on the same model and inputs, and the kernels are scaled
    // down if their profiled times add up to more.
    // Half a second of runs at least: the median of 75 ms of them (15
    // samples of 5 ms) was once 0.42 ms for a model that runs in 0.25, and
    // the cache keeps a model's first calibration.
    TimingOptions plain = o;
    plain.samples = std::max(3, std::min(runs, 15));
    plain.min_sample_ms = std::max({o.min_sample_ms, 5.0, 500.0 / plain.samples});
    const double plain_ms = TimeGraph(named, plain);
    double kernel_ms = 0;
    for (double ms : t.node_ms) kernel_ms += ms;
    const double scale = kernel_ms > plain_ms && kernel_ms > 0 ? plain_ms / kernel_ms : 1.0;
    for (double& ms : t.node_ms) ms *= scale;
    // The profile's run (ORT's `model_run` event: the kernels and the
    // executor between them) leaves out what the caller's run spends
    // around it, taking the inputs and handing the outputs back: the same
    // for any graph with these inputs and outputs, so a cost per run (at
    // 1 thread, 0.3 ms of a 0.63 ms run with a 512 KB output). Where the
    // profiler slowed the run down more than it did the kernels, what is
    // left is less than that, down to 0.
    // The profiled run is slower than a plain one by the profiler's cost
    // per kernel (ProfilerCost::per_kernel_run_ms).
    t.fixed_ms = std::max(0.0, plain_ms - std::max(0.0, t.run_ms - events * profiler.per_kernel_run_ms) * scale);
    t.run_ms = plain_ms;
    return t;
  }

  // What ORT's profiler adds per kernel, measured once per backend on a
  // chain of kernels that do almost nothing (64 additions of one float):
  // to each kernel event (its mean event less a plain run's time per node),
  // and to the profiled run.
  struct ProfilerCost {
    double per_event_ms = 0, per_kernel_run_ms = 0;
  };
  ProfilerCost Profiler(const TimingOptions& o) {
    if (profiler_) return *profiler_;
    constexpr int kChain = 64;
    GraphBuilder b(1);
    ValueId y = b.Input("x", {1, 1});
    const ValueId one = b.Weight("one", {1}, 1.0f, 1.0f);
    for (int k = 0; k < kChain; ++k) y = b.Op("Add", {y, one});
    Graph chain = Tagged(b.Build({y}));
    Files f(this);
    std::string model = f.Model(chain), inputs = f.Inputs(chain, o.seed);
    Json r = server_->Request({{"op", "profile"},
                               {"model", model},
                               {"inputs", inputs},
                               {"runs", 50},
                               {"warmup", 5},
                               {"prefix", dir_ + "/profile" + std::to_string(++seq_)}},
                              "profiling the profiler");
    // The events' mean over their middle 80%: ORT's profiler gives whole
    // microseconds (most of these events are 2-4 us), and a few events the
    // machine preempted (milliseconds) moved the plain mean from 3.4 to
    // 8.9 us between processes, where this one stays within 3.0-3.5 us; the
    // median, a whole microsecond, would lose the fraction.
    std::vector<double> event_times;
    for (const Json& run : r.at("kernels"))
      for (const Json& k : run) event_times.push_back(k.at("ms").get<double>());
    const double event_ms = TrimmedMean(event_times, 0.1);
    const std::vector<double> profiled = r.at("run_ms").get<std::vector<double>>();
    TimingOptions plain = o;
    plain.samples = 7;
    plain.min_sample_ms = std::max(o.min_sample_ms, 5.0);
    const double per_node = TimeGraph(chain, plain) / kChain;
    ProfilerCost c;
    if (!event_times.empty() && !profiled.empty()) {
      c.per_event_ms = std::max(0.0, event_ms - per_node);
      c.per_kernel_run_ms = std::max(0.0, Median(profiled) / kChain - per_node);
    }
    profiler_ = c;
    return c;
  }

 private:
  // Files of one request, removed when it is answered.
  class Files {
   public:
    explicit Files(OrtBackend* b) : b_(b) {}
    ~Files() {
      for (const auto& p : paths_) ::unlink(p.c_str());
      for (const auto& d : dirs_) RemoveDir(d);
    }
    std::string Model(const Graph& g) {
      std::string p = b_->dir_ + "/model" + std::to_string(++b_->seq_) + ".onnx";
      WriteOptions write;
      write.at_graph_opset = true;
      write.fuse_functions = false;  // see WriteOptions
      paths_.push_back(p);
      if (WritesExternalData(g, write)) paths_.push_back(p + ".data");
      // A graph a rewrite gave a newer operator (HardSwish) is timed at
      // the opset that has it, as it will be written.
      if (const int64_t needed = OpsetNeeded(g); needed > g.opset()) {
        Graph raised = g;
        raised.info().opsets[""] = needed;
        WriteOnnxFile(raised, p, nullptr, write);
        return p;
      }
      WriteOnnxFile(g, p, nullptr, write);
      return p;
    }
    // Where ORT writes its optimised graph (and its weights, apart).
    std::string Optimized() {
      std::string p = b_->dir_ + "/optimized" + std::to_string(++b_->seq_) + ".onnx";
      paths_.push_back(p);
      paths_.push_back(p + ".weights");
      return p;
    }
    std::string Inputs(const Graph& g, uint64_t seed) {
      std::string d = b_->dir_ + "/inputs" + std::to_string(++b_->seq_);
      if (::mkdir(d.c_str(), 0700) != 0) Fail("ONNX Runtime backend: mkdir ", d, ": ", std::strerror(errno));
      dirs_.push_back(d);
      std::vector<at::Tensor> values = RandomInputs(g, seed);
      std::vector<std::pair<std::string, at::Tensor>> named;
      for (size_t k = 0; k < g.inputs().size(); ++k) named.push_back({g.value(g.inputs()[k]).name, values.at(k)});
      WriteOrtInputs(d, named);
      return d;
    }

   private:
    OrtBackend* b_;
    std::vector<std::string> paths_, dirs_;
  };

  // A copy whose nodes and computed values carry their ids in their names,
  // so that the profiler's kernel names can be traced back.
  static Graph Tagged(const Graph& g) {
    Graph named = g;
    std::vector<char> is_output(g.num_values(), 0);
    for (ValueId v : g.outputs()) is_output[v] = 1;
    for (NodeId id = 0; id < named.num_nodes(); ++id) {
      named.mutable_node(id).name = "rlflow_n" + std::to_string(id);
      for (ValueId v : named.node(id).outputs) {
        std::string name = "rlflow_v" + std::to_string(v);
        if (!is_output[v] && named.value(v).name != name && named.FindValue(name) == kNoValue)
          named.RenameValue(v, name);
      }
    }
    return named;
  }

  OrtOptions options_;
  std::string dir_;
  std::unique_ptr<Server> server_;
  int64_t seq_ = 0;
  std::optional<ProfilerCost> profiler_;
};

}  // namespace

std::string OrtNodeModules() {
  if (const char* env = std::getenv("RLFLOW_ORT_NODE_MODULES")) return env;
  std::string pkg = FindRunfile("third_party/onnxruntime_node/package.json");
  // The runfile links back to the checkout, where ./bazelw installed node_modules.
  std::string real = pkg.empty() ? "" : RealPath(pkg);
  std::string dir = real.empty() ? "third_party/onnxruntime_node/node_modules"
                                 : real.substr(0, real.find_last_of('/')) + "/node_modules";
  if (!FileExists(dir + "/onnxruntime-node/package.json"))
    Fail("onnxruntime-node is not installed in ", dir,
         ": run ./bazelw (it installs it) or `npm ci --ignore-scripts` there");
  return dir;
}

std::string OrtRunScript() {
  std::string p = FindRunfile("runtime/ort_run.js");
  if (p.empty()) Fail("runtime/ort_run.js not found among the runfiles (run the binary through ./bazelw run)");
  return p;
}

void WriteOrtInputs(const std::string& dir, const std::vector<std::pair<std::string, at::Tensor>>& inputs) {
  Json manifest = Json::array();
  for (size_t k = 0; k < inputs.size(); ++k) {
    at::Tensor t = inputs[k].second.contiguous();
    std::string file = "input" + std::to_string(k) + ".bin";
    std::ofstream out(dir + "/" + file, std::ios::binary);
    out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
    if (!out) Fail("cannot write ", dir, "/", file);
    manifest.push_back({{"name", inputs[k].first},
                        {"dtype", DTypeString(t.scalar_type())},
                        {"shape", std::vector<int64_t>(t.sizes().begin(), t.sizes().end())},
                        {"file", file}});
  }
  WriteFileAtomically(dir + "/inputs.json", manifest.dump());
}

NodeId AttributeOrtKernel(const Graph& graph, const OrtKernel& kernel) {
  NodeId node = kNoNode;
  int id = -1;
  if (FindTagged(kernel.name, "rlflow_n", &id) && id < graph.num_nodes()) {
    node = id;
  } else if (FindTagged(kernel.name, "rlflow_v", &id) && id < graph.num_values()) {
    node = graph.value(id).producer;
  } else {
    // A kernel named after a graph output (ORT names re-laid-out nodes by
    // the value they produce).
    size_t best = 0;
    for (ValueId v : graph.outputs()) {
      const std::string& name = graph.value(v).name;
      if (!name.empty() && name.size() > best && kernel.name.compare(0, name.size(), name) == 0) {
        best = name.size();
        node = graph.value(v).producer;
      }
    }
  }
  // A node ORT made (a fusion with a name of its own): the producer of the
  // value it writes.
  for (size_t k = 0; node == kNoNode && k < kernel.outputs.size(); ++k) {
    const std::string& out = kernel.outputs[k];
    if (FindTagged(out, "rlflow_v", &id) && id < graph.num_values()) {
      node = graph.value(id).producer;
    } else {
      for (ValueId v : graph.outputs())
        if (graph.value(v).name == out) node = graph.value(v).producer;
    }
  }
  if (node == kNoNode) return kNoNode;
  // A fused kernel is named after its last member (Conv -> BN -> Relu is
  // named by the Relu's output): charge the member whose operator it runs.
  NodeId at = node;
  for (int step = 0; step < 4 && !RunsOp(kernel.op, graph.node(at).op); ++step) {
    const Node& n = graph.node(at);
    if (n.inputs.empty() || n.inputs[0] == kNoValue) break;
    NodeId up = graph.value(n.inputs[0]).producer;
    if (up == kNoNode) break;
    at = up;
  }
  return RunsOp(kernel.op, graph.node(at).op) ? at : node;
}

void FindOrtFusions(const Graph& graph, const std::vector<char>& ran,
                    const std::vector<std::pair<NodeId, OrtNodeIO>>& kernels, std::vector<NodeId>* fused_into,
                    std::vector<int>* fused_distance) {
  const int n = graph.num_nodes();
  RLFLOW_CHECK(static_cast<int>(ran.size()) == n, "FindOrtFusions: ", ran.size(), " flags for ", n, " nodes");
  fused_into->assign(n, kNoNode);
  fused_distance->assign(n, 0);
  const std::vector<char> weight_only = WeightOnlyNodes(graph);
  const std::vector<std::vector<std::pair<NodeId, int>>> consumers = graph.Consumers();
  auto value_of = [&graph](const std::string& name) -> ValueId {
    int id = -1;
    if (FindTagged(name, "rlflow_v", &id) && id < graph.num_values()) return id;
    return name.empty() ? kNoValue : graph.FindValue(name);
  };
  // Fusions are a few operators deep (GELU's five, a layer norm's nine).
  constexpr int kMaxDepth = 12;
  for (const auto& [anchor, io] : kernels) {
    if (anchor == kNoNode || anchor >= n) continue;
    std::set<ValueId> inputs;
    for (const std::string& name : io.inputs)
      if (ValueId v = value_of(name); v != kNoValue) inputs.insert(v);
    // Upstream from what the kernel writes to what it reads: the nodes on
    // the way that no kernel ran were computed by this one.
    std::set<NodeId> group = {anchor}, seen;
    std::vector<std::pair<NodeId, int>> queue;
    for (const std::string& name : io.outputs)
      if (ValueId v = value_of(name); v != kNoValue && graph.value(v).producer != kNoNode)
        queue.push_back({graph.value(v).producer, 0});
    // A kernel that writes only tensors of ORT's own (a Conv + Relu run in
    // the blocked layout writes "reorder_token_0", and a ReorderOutput hands
    // the value on): the walk starts from the value it is named after, and
    // goes no further upstream than its node. Without it the Relu was left
    // "run by no kernel", so every Relu of its key was costed free and the
    // search added Relus of no cost by the hundred.
    const ValueId named_value = queue.empty() ? value_of(io.name) : kNoValue;
    const bool from_name = named_value != kNoValue && graph.value(named_value).producer != kNoNode;
    if (from_name) queue.push_back({graph.value(named_value).producer, 0});
    while (!queue.empty()) {
      auto [u, depth] = queue.back();
      queue.pop_back();
      if (!seen.insert(u).second) continue;
      if (u != anchor) {
        if (ran[u] || weight_only[u] || graph.node(u).opaque()) continue;
        group.insert(u);
      }
      if (depth >= kMaxDepth) continue;
      // What such a kernel reads may not resolve: no walk beyond its node.
      if (from_name && u == anchor) continue;
      for (ValueId v : graph.node(u).inputs)
        if (v != kNoValue && !inputs.count(v) && graph.value(v).producer != kNoNode)
          queue.push_back({graph.value(v).producer, depth + 1});
    }
    if (group.size() == 1) continue;
    // Each member's distance from the kernel's node, within the group:
    // upstream of it (> 0) or downstream (< 0).
    for (int dir : {+1, -1}) {
      std::vector<NodeId> frontier = {anchor};
      std::set<NodeId> reached = {anchor};
      for (int step = 1; !frontier.empty(); ++step) {
        std::vector<NodeId> next;
        for (NodeId u : frontier) {
          if (dir > 0) {
            for (ValueId v : graph.node(u).inputs)
              if (v != kNoValue && graph.value(v).producer != kNoNode) next.push_back(graph.value(v).producer);
          } else {
            for (ValueId v : graph.node(u).outputs)
              for (const auto& [c, slot] : consumers[v]) next.push_back(c), (void)slot;
          }
        }
        frontier.clear();
        for (NodeId m : next) {
          if (!group.count(m) || !reached.insert(m).second) continue;
          frontier.push_back(m);
          if ((*fused_into)[m] == kNoNode) {
            (*fused_into)[m] = anchor;
            (*fused_distance)[m] = dir * step;
          }
        }
      }
    }
  }
}

namespace {

const std::map<std::string, int32_t> kOrtTypeCodes = {
    {"float32", 1}, {"uint8", 2}, {"int8", 3},     {"uint16", 4},   {"int16", 5},   {"int32", 6},  {"int64", 7},
    {"string", 8},  {"bool", 9},  {"float16", 10}, {"float64", 11}, {"uint32", 12}, {"uint64", 13}};

struct OrtOutput {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;  // read only where asked
};

// The outputs ort_run.js wrote into `dir` (outputs.json, a raw file each),
// in order; their bytes where asked.
std::vector<OrtOutput> ParseOrtOutputs(const std::string& dir, bool read_bytes) {
  std::vector<OrtOutput> outputs;
  for (const auto& o : Json::parse(ReadFile(dir + "/outputs.json"))) {
    OrtOutput out;
    out.name = o.at("name").get<std::string>();
    out.dtype = o.at("dtype").get<std::string>();
    out.shape = o.at("shape").get<std::vector<int64_t>>();
    if (read_bytes) out.bytes = ReadFile(dir + "/" + o.at("file").get<std::string>());
    outputs.push_back(std::move(out));
  }
  return outputs;
}

// One run of the model at `model_path` in ONNX Runtime (ort_run.js, one
// thread) on `inputs`, through `dir`: its outputs in order.
std::vector<OrtOutput> RunOrtOnce(const std::string& model_path,
                                  const std::vector<std::pair<std::string, at::Tensor>>& inputs, const std::string& dir,
                                  bool read_bytes) {
  WriteOrtInputs(dir, inputs);
  ProgramIo io;
  io.out = dir + "/log.txt";
  io.env["NODE_PATH"] = OrtNodeModules();
  const int status = RunProgram({"node", OrtRunScript(), model_path, dir}, io);
  if (status != 0) {
    std::string log = FileExists(dir + "/log.txt") ? ReadFile(dir + "/log.txt") : "";
    size_t at = log.rfind("ort_run: ");
    Fail("ONNX Runtime could not run the model (", FirstLine(at == std::string::npos ? log : log.substr(at + 9)), ")");
  }
  return ParseOrtOutputs(dir, read_bytes);
}

// An output's bytes as a tensor of its type and shape.
at::Tensor OrtTensor(const OrtOutput& o) {
  auto code = kOrtTypeCodes.find(o.dtype);
  const DType dtype = code == kOrtTypeCodes.end() ? DType::kUndefined : DTypeFromCode(code->second);
  if (dtype == DType::kUndefined || dtype == DType::kString)
    Fail("output '", o.name, "' of element type ", o.dtype, " cannot be read");
  at::Tensor t = at::empty(o.shape, at::TensorOptions().dtype(ToAtenType(dtype)));
  if (static_cast<size_t>(t.numel() * t.element_size()) != o.bytes.size())
    Fail("output '", o.name, "' has ", o.bytes.size(), " bytes for its shape");
  if (!o.bytes.empty()) std::memcpy(t.data_ptr(), o.bytes.data(), o.bytes.size());
  return t;
}

}  // namespace

std::map<std::string, std::pair<int32_t, std::vector<int64_t>>> OrtTensorTypes(const std::string& model_bytes,
                                                                               const std::vector<std::string>& names,
                                                                               uint64_t seed) {
  onnx::ModelProto model;
  if (!model.ParseFromString(model_bytes)) Fail("typing run: the model does not parse");
  onnx::GraphProto* gp = model.mutable_graph();
  std::set<std::string> initializers, outputs;
  for (const auto& t : gp->initializer()) initializers.insert(t.name());
  for (const auto& o : gp->output()) outputs.insert(o.name());
  std::map<std::string, const onnx::ValueInfoProto*> info;
  for (const auto& vi : gp->value_info()) info[vi.name()] = &vi;
  // The tensors wanted are the graph's only outputs (its own may be
  // sequences, which the runner cannot fetch), typed as far as the model
  // says (element type only: ONNX Runtime checks declared output shapes).
  std::vector<onnx::ValueInfoProto> extra;
  std::map<std::string, onnx::ValueInfoProto> own;
  for (const auto& o : gp->output()) own[o.name()] = o;
  gp->clear_output();
  for (const auto& name : names) {
    if (outputs.count(name)) {
      extra.push_back(own[name]);
      continue;
    }
    onnx::ValueInfoProto vi;
    vi.set_name(name);
    auto it = info.find(name);
    if (it != info.end() && it->second->type().has_tensor_type() && it->second->type().tensor_type().elem_type() != 0)
      vi.mutable_type()->mutable_tensor_type()->set_elem_type(it->second->type().tensor_type().elem_type());
    extra.push_back(vi);
  }
  for (auto& vi : extra) *gp->add_output() = vi;
  gp->clear_value_info();
  // Seeded inputs at the bound shapes.
  at::Generator gen = at::detail::createCPUGenerator(seed);
  std::vector<std::pair<std::string, at::Tensor>> inputs;
  for (const auto& vi : gp->input()) {
    if (initializers.count(vi.name())) continue;
    const auto& tt = vi.type().tensor_type();
    std::vector<int64_t> shape;
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value()) Fail("typing run: graph input '", vi.name(), "' has a symbolic dimension");
      shape.push_back(d.dim_value());
    }
    DType dtype = DTypeFromCode(tt.elem_type());
    if (dtype == DType::kUndefined || dtype == DType::kString)
      Fail("typing run: graph input '", vi.name(), "' has element type ", tt.elem_type());
    at::ScalarType st = ToAtenType(dtype);
    at::Tensor t = at::isFloatingType(st) ? at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat)).to(st)
                                          : at::zeros(shape, at::TensorOptions().dtype(st));
    inputs.push_back({vi.name(), t});
  }
  const std::string dir = MakeTempDir("rlflow-typing-");
  std::map<std::string, std::pair<int32_t, std::vector<int64_t>>> types;
  std::string error;
  try {
    WriteFileAtomically(dir + "/model.onnx", model.SerializeAsString());
    std::set<std::string> wanted(names.begin(), names.end());
    for (const auto& o : RunOrtOnce(dir + "/model.onnx", inputs, dir, false)) {
      auto code = kOrtTypeCodes.find(o.dtype);
      if (!wanted.count(o.name) || code == kOrtTypeCodes.end()) continue;
      types[o.name] = {code->second, o.shape};
    }
  } catch (const Error& e) {
    error = e.what();
  } catch (const std::exception& e) {
    error = std::string("typing run: ") + e.what();
  }
  RemoveDir(dir);
  if (!error.empty()) Fail(error);
  return types;
}

std::vector<at::Tensor> OrtOutputs(const std::string& model_path,
                                   const std::vector<std::pair<std::string, at::Tensor>>& inputs) {
  const std::string dir = MakeTempDir("rlflow-outputs-");
  std::vector<at::Tensor> outputs;
  std::string error;
  try {
    for (const OrtOutput& o : RunOrtOnce(model_path, inputs, dir, true)) outputs.push_back(OrtTensor(o));
  } catch (const Error& e) {
    error = e.what();
  } catch (const std::exception& e) {
    error = e.what();
  }
  RemoveDir(dir);
  if (!error.empty()) Fail(error);
  return outputs;
}

std::vector<at::Tensor> ReadOrtOutputs(const std::string& dir) {
  std::vector<OrtOutput> parsed;
  try {
    parsed = ParseOrtOutputs(dir, true);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    Fail("ONNX Runtime's outputs in ", dir, " cannot be read (", FirstLine(e.what()), ")");
  }
  std::vector<at::Tensor> outputs;
  for (const OrtOutput& o : parsed) outputs.push_back(OrtTensor(o));
  return outputs;
}

std::unique_ptr<TimingBackend> MakeOrtBackend(const OrtOptions& options) {
  return std::make_unique<OrtBackend>(options);
}

}  // namespace rlflow

namespace rlflow {

RLFLOW_REGISTER_BACKEND(ort, BackendInfo{"ort",
                                         "ONNX Runtime's CPU execution provider (onnxruntime-node), with its own "
                                         "graph optimisations at --ort_level (default all)",
                                         {"ort_level"},
                                         "ort",
                                         /*newest_opset=*/true,
                                         [](const BackendOptions& b) {
                                           OrtOptions o;
                                           o.threads = b.threads;
                                           auto level = b.settings.find("ort_level");
                                           if (level != b.settings.end()) o.level = level->second;
                                           return MakeOrtBackend(o);
                                         }});

}  // namespace rlflow

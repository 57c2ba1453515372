// The branches stage: each branch of the model's top-level If nodes and
// each body of its top-level Loops and Scans optimised as a model of its
// own, by this same pipeline (RunPipeline: its search, check, verdict and
// guard), and put back where its run wrote an optimised graph
// (core/onnx_branches.h). The rest of the pipeline then runs on the model
// with its optimised branches and bodies: the If, Loop and Scan nodes stay
// opaque there.
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "core/onnx_branches.h"
#include "core/onnx_hoist.h"
#include "core/tensor.h"
#include "optimiser/stages.h"
#include "runtime/executor.h"
#include "runtime/ort_backend.h"
#include "runtime/verdict.h"

namespace rlflow {
namespace {

// Subgraphs of subgraphs are optimised to this depth.
constexpr int kMaxBranchDepth = 3;

int64_t DefaultOpset(const onnx::ModelProto& m) {
  for (const auto& op : m.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") return op.version();
  return 0;
}

// The optimised branches' records once they are put back as they were.
void PutBack(BranchesRecord& rec, const std::string& why) {
  for (BranchRecord& b : rec.branches)
    if (b.outcome == "optimised") {
      b.outcome = "not optimised";
      b.note = why;
    }
  if (!rec.hoisted.empty()) {
    rec.hoisted.clear();
    rec.hoist_note = why;
  }
}

// Writes `model` to `path` with its graph inputs declared at the shapes
// `graph` binds them to (ONNX Runtime runs it there), then gives it back
// its own declarations: its weights are not copied (the check had held
// four copies of a model with loops).
void WriteWithBoundInputs(const std::string& path, onnx::ModelProto* model, const Graph& graph) {
  const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> own = model->graph().input();
  for (auto& vi : *model->mutable_graph()->mutable_input()) {
    const ValueId v = graph.FindValue(vi.name());
    if (v == kNoValue || !graph.value(v).is_graph_input || !graph.value(v).type.rank_known) continue;
    auto* shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t d : graph.value(v).type.shape) shape->add_dim()->set_dim_value(d);
  }
  std::string bytes;
  try {
    bytes = model->SerializeAsString();
  } catch (...) {
    *model->mutable_graph()->mutable_input() = own;
    throw;
  }
  *model->mutable_graph()->mutable_input() = own;
  WriteFileAtomically(path, bytes);
}

// Moves loop-invariant products out of the model's Scan and Loop bodies
// (core/onnx_hoist.h) where the result computes what `model` computes in
// ONNX Runtime, on the run's inputs (RandomInputs) at their bound shapes;
// `model` is left as it is otherwise (`rec.hoist_note` says why). True if
// something was moved out.
bool Hoist(OptimiseRun& r, onnx::ModelProto* model) {
  BranchesRecord& rec = r.res.branches;
  onnx::ModelProto moved = *model;
  const std::vector<HoistedLoop> hoisted = HoistLoopInvariantProducts(&moved);
  if (hoisted.empty()) return false;
  const Graph& graph = r.model.graph;
  try {
    const std::string pa = r.branches_dir + "/rlflow-hoist-before.onnx",
                      pb = r.branches_dir + "/rlflow-hoist-after.onnx";
    WriteWithBoundInputs(pa, model, graph);
    WriteWithBoundInputs(pb, &moved, graph);
    const std::vector<at::Tensor> values = RandomInputs(graph, r.o.seed);
    std::vector<std::pair<std::string, at::Tensor>> inputs;
    for (size_t k = 0; k < graph.inputs().size() && k < values.size(); ++k)
      inputs.push_back({graph.value(graph.inputs()[k]).name, values[k]});
    const std::vector<at::Tensor> want = OrtOutputs(pa, inputs), got = OrtOutputs(pb, inputs);
    std::remove(pa.c_str()), std::remove(pb.c_str());
    if (want.size() != got.size()) Fail("it has ", got.size(), " outputs, not ", want.size());
    double worst = 0;
    for (size_t k = 0; k < want.size(); ++k) {
      if (!want[k].sizes().equals(got[k].sizes()) || want[k].scalar_type() != got[k].scalar_type())
        Fail("its output ", k, " differs in type or shape");
      worst = std::max(worst, RelativeError(got[k], want[k]));
    }
    if (!(worst <= 1e-4)) Fail(Format("its outputs differ (relative error %.3g)", worst));
    rec.hoist_error = worst;
  } catch (const std::exception& e) {  // rlflow::Error, or a library's
    rec.hoist_note = std::string("not kept: ") + e.what();
    r.warn("loop-invariant products moved out of the Scan and Loop bodies are not kept: " + std::string(e.what()));
    return false;
  }
  rec.hoisted = hoisted;
  for (const HoistedLoop& h : hoisted) {
    r.info(Format("%s '%s': %d body nodes (%d MatMul or Gemm) computed once over the sequence before it", h.op.c_str(),
                  h.node_name.c_str(), h.nodes, h.matmuls));
  }
  *model = std::move(moved);
  return true;
}

// A verdict in the report: its outcome and wall-time speedup with interval.
nlohmann::ordered_json VerdictJson(const Verdict& v) {
  return {{"outcome", v.OutcomeName()}, {"speedup", v.wall.median}, {"low", v.wall.lo}, {"high", v.wall.hi}};
}

// The model with its optimised branches (r.model) against `before`, timed
// in ONNX Runtime once per value of the conditions (bool graph inputs of at
// most one element that an If reads as its condition; up to three); puts
// `before` back where one is slower or cannot be timed.
void CheckInModel(OptimiseRun& r, LoadedModel before) {
  BranchesRecord& rec = r.res.branches;
  TimingBackend* ort = nullptr;
  if (r.o.force_optimised) return;
  if (r.backend->name() == "ort") {
    ort = r.counted.get();
    rec.check_device = "ort";
  } else if (!r.guard_device.empty()) {
    std::string why;
    ort = GuardBackend(r, &why);
    if (ort == nullptr) {
      rec.check_note = "not measured in " + r.guard_device + " (" + why + ")";
      r.warn("the optimised subgraphs are not checked in ONNX Runtime: " + rec.check_note);
      return;
    }
    rec.check_device = r.guard_device;
  } else {
    return;
  }
  const Graph& given = r.model.AsGiven();
  std::vector<ValueId> conditions;
  for (NodeId id = 0; id < given.num_nodes(); ++id) {
    const Node& n = given.node(id);
    if (!n.opaque() || n.op != "If" || !n.domain.empty() || n.inputs.empty() || n.inputs[0] == kNoValue) continue;
    const Value& c = given.value(n.inputs[0]);
    if (c.is_graph_input && c.type.dtype == DType::kBool && c.type.NumElements() <= 1 &&
        std::find(conditions.begin(), conditions.end(), n.inputs[0]) == conditions.end() && conditions.size() < 3)
      conditions.push_back(n.inputs[0]);
  }
  // As many pairs as a verdict in that runtime takes for the model's run
  // time (VerdictPairs: a fast model's up to 120 in 12 session pairs of
  // ONNX Runtime, as the guard's; 40 in 4 had left a 1-3 ms model's
  // interval at +-2-6%, too wide to see a loss of a few percent).
  int pairs = r.o.measure_runs;
  std::string slower;
  if (pairs <= 0) {
    try {
      TimingOptions once;
      once.samples = 3;
      once.seed = r.o.seed;
      pairs = VerdictPairs(ort->TimeGraph(before.AsGiven(), once) / 1e3, *ort);
    } catch (const Error& e) {
      rec.check_note = rec.check_device + " could not run the model: " + e.what();
      slower = rec.check_note;
    }
  }
  for (int values = 0; values < (1 << conditions.size()) && slower.empty(); ++values) {
    Graph a = before.AsGiven(), b = given;
    BranchesRecord::ModelCheck check;
    for (size_t k = 0; k < conditions.size(); ++k) {
      const Value& c = given.value(conditions[k]);
      const bool value = (values >> k) & 1;
      auto data = std::make_shared<const TensorData>(c.type.dtype, c.type.shape,
                                                     std::string(c.type.NumElements(), value ? '\1' : '\0'));
      for (Graph* g : {&a, &b}) {
        const ValueId v = g->FindValue(c.name);
        if (v != kNoValue) g->mutable_value(v).sample_data = data;
      }
      check.condition += (check.condition.empty() ? "" : ", ") + c.name + "=" + (value ? "1" : "0");
    }
    r.info("measuring the model with its optimised subgraphs against the model as it came in " + rec.check_device +
           (check.condition.empty() ? "" : " (" + check.condition + ")") + ", " + std::to_string(pairs) +
           " interleaved pairs");
    try {
      check.verdict = Judge(ort->TimePaired(a, b, pairs, VerdictTiming(pairs, r.o.seed)), 0.95);
    } catch (const Error& e) {
      rec.check_note = rec.check_device + " could not time the pair: " + e.what();
      slower = rec.check_note;
      break;
    }
    r.info("in " + rec.check_device + ": " + check.verdict.ToString());
    if (check.verdict.outcome == Verdict::Outcome::kSlower)
      slower = "slower in " + rec.check_device + " inside the model" +
               (check.condition.empty() ? "" : " (" + check.condition + ")") +
               Format(": %.3fx", check.verdict.wall.median);
    rec.checks.push_back(check);
  }
  if (slower.empty()) return;
  r.model = std::move(before);
  PutBack(rec, slower);
  r.warn("the optimised subgraphs are put back as they were: " + slower);
}

// Links each external data file the model reads (`locations`, relative to
// its directory: ModelInfo::external_files) into `to`, under that name,
// pointing to the file in `from`, the model's directory. `*why` says why
// not, where a location is one of the files the stage writes there
// ("rlflow-*") or a link cannot be made.
void LinkExternalData(const std::vector<std::string>& locations, const std::string& from, const std::string& to,
                      std::string* why) {
  std::string base = from.empty() ? "." : from;
  if (base[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) {
      *why = std::string("the working directory is unknown: ") + std::strerror(errno);
      return;
    }
    base = std::string(cwd) + "/" + base;
  }
  for (const std::string& location : locations) {
    // Locations that leave the model's directory are refused at import.
    if (location.empty() || location[0] == '/' || location.rfind("rlflow-", 0) == 0) {
      *why = "the model names an external data file '" + location + "' that the stage cannot link";
      return;
    }
    for (size_t slash = location.find('/'); slash != std::string::npos; slash = location.find('/', slash + 1))
      ::mkdir((to + "/" + location.substr(0, slash)).c_str(), 0700);  // exists already: fine
    const std::string link = to + "/" + location;
    if (::symlink((base + "/" + location).c_str(), link.c_str()) != 0 && errno != EEXIST) {
      *why = "cannot link its external data file '" + location + "': " + std::strerror(errno);
      return;
    }
  }
}

}  // namespace

int BranchesRecord::optimised() const {
  int n = 0;
  for (const BranchRecord& b : branches) n += b.outcome == "optimised" ? 1 : 0;
  return n;
}

void Branches(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  BranchesRecord& rec = r.res.branches;
  bool any = false;
  for (NodeId id = 0; id < r.model.graph.num_nodes(); ++id) {
    const Node& n = r.model.graph.node(id);
    any = any || (n.opaque() && (n.op == "If" || n.op == "Loop" || n.op == "Scan") && n.domain.empty());
  }
  if (!any) return;
  if (o.branch_depth >= kMaxBranchDepth) {
    rec.note = Format("not optimised: If, Loop and Scan nodes nested deeper than %d", kMaxBranchDepth);
  } else if (r.model.file.empty()) {
    rec.note = "not optimised: the model is not written back as its file is (its nodes are out of order)";
  }
  if (!rec.note.empty()) {
    r.info("If branches and Loop and Scan bodies " + rec.note);
    return;
  }
  onnx::ModelProto model;
  if (!model.ParseFromString(ReadFile(r.model.file, "the input model")))
    Fail("the input model '", r.model.file, "' no longer parses");
  // The branches' models, their runs' outputs and the model with the
  // branches put back are files in one directory; where the model's weights
  // are in external data files, these are linked there under the names the
  // model gives them (ONNX's locations, relative to the model's directory),
  // so that the weights the branches read stay where they are.
  r.branches_dir = MakeTempDir("rlflow-branches-");
  const auto branch_file = [&r](size_t k, const char* suffix) {
    return r.branches_dir + "/rlflow-branch" + std::to_string(k) + suffix;
  };
  if (r.model.external_data) {
    std::string why;
    LinkExternalData(r.model.graph.info().external_files, DirName(r.model.file), r.branches_dir, &why);
    if (!why.empty()) {
      rec.note = "not optimised: " + why;
      r.info("If branches and Loop and Scan bodies " + rec.note);
      return;
    }
  }
  // The model as it came, where the bodies' products were moved out (the
  // run then goes on with the model that computes them before the loops, as
  // imported from its file: the bodies read the values it computes at the
  // shapes it computes them).
  std::optional<LoadedModel> as_it_came;
  if (Hoist(r, &model)) {
    const std::string path = r.branches_dir + "/rlflow-hoisted.onnx";
    WriteFileAtomically(path, model.SerializeAsString());
    try {
      LoadedModel with = ImportModelFile(r, path);
      with.source = r.model.source;
      as_it_came = std::move(r.model);
      r.model = std::move(with);
    } catch (const Error& e) {
      rec.hoisted.clear();
      rec.hoist_note = std::string("not kept: the model with them does not import: ") + e.what();
      r.warn("loop-invariant products moved out of the Scan and Loop bodies are not kept: " + rec.hoist_note);
      if (!model.ParseFromString(ReadFile(r.model.file, "the input model"))) Fail("the input model no longer parses");
    }
  }
  const Graph& graph = r.model.graph;
  std::vector<Subgraph> branches = ExtractSubgraphs(model);
  // Each branch's model to its file now, its bytes freed (a model's weights
  // would otherwise be held once per branch during the branches' runs).
  for (size_t k = 0; k < branches.size(); ++k) {
    if (branches[k].model.empty()) continue;
    WriteFileAtomically(branch_file(k, ".onnx"), branches[k].model);
    std::string().swap(branches[k].model);
  }
  const std::string cache = r.res.configure.timing_cache;
  // --time_limit bounds the searches of the whole run: each branch's run
  // gets an equal share of what is left, the model around them the rest.
  int runs_left = 0;
  for (const Subgraph& b : branches) runs_left += b.why_not.empty() && b.nodes > 0 ? 1 : 0;
  for (size_t k = 0; k < branches.size(); ++k) {
    const Subgraph& b = branches[k];
    BranchRecord br;
    br.op = b.op;
    br.node = b.node_name;
    br.attribute = b.attribute;
    br.nodes_before = b.nodes;
    const std::string label = b.op + " '" + b.node_name + "' " + b.attribute;
    if (o.interrupted != nullptr && o.interrupted->load()) {
      br.outcome = "not optimised";
      br.note = "interrupted";
    } else if (!b.why_not.empty()) {
      br.outcome = "not optimised";
      br.note = b.why_not;
    } else if (b.nodes == 0) {
      br.outcome = "unchanged";
      br.note = "no nodes";
    } else {
      const std::string in = branch_file(k, ".onnx"), out = branch_file(k, ".rlflow.onnx");
      PipelineOptions sub = o;
      sub.model = in;
      sub.output = out;
      sub.report = sub.dot = sub.picture = "";
      sub.loaded_rules = r.rule_db;
      sub.branch_depth = o.branch_depth + 1;
      sub.fold_weights = false;
      if (o.time_limit_s > 0) sub.time_limit_s = std::max(1e-3, (o.time_limit_s - r.branch_search_s) / (runs_left + 1));
      --runs_left;
      br.time_limit_s = sub.time_limit_s;
      // At the model's opset: the branch runs at the model's.
      sub.target_opset = static_cast<int>(DefaultOpset(model));
      // Its inputs at the shapes the model has them at (--input_shape,
      // --free_dim; a computed value at what the graph computes there). A
      // length only the values set (the boxes NonZero or TopK leave, in a
      // detector's post-processing) is bound as a free dimension
      // (--free_dim; such a value's declared type in the branch has no
      // shape, so the check's second binding moves every dimension of it);
      // it had been passed on as -1 and the branch not optimised.
      sub.input_shapes.clear();
      sub.input_data.clear();
      sub.second_input_shapes.clear();  // the main graph's
      // A Loop body's own inputs: the iteration number and the condition are
      // scalars; each loop-carried value at the shape the Loop's initial
      // value has in the model (a body declares such shapes symbolic where
      // they change from step to step, as torch.onnx does: the check's
      // second binding then moves them). A Scan body's: each state
      // variable at its initial value's shape, each scan input's element
      // at the scan input's shape without its scan axis.
      const onnx::NodeProto& np = model.graph().node(b.node);
      const onnx::GraphProto* body = nullptr;
      int64_t num_scan_inputs = 0;
      std::vector<int64_t> scan_axes;
      for (const auto& a : np.attribute()) {
        if (a.name() == b.attribute && a.has_g()) body = &a.g();
        if (a.name() == "num_scan_inputs") num_scan_inputs = a.i();
        if (a.name() == "scan_input_axes") scan_axes.assign(a.ints().begin(), a.ints().end());
      }
      const size_t first_carried = b.op == "Loop" ? 2 : 0;
      const int64_t first_scanned = b.op == "Scan" ? np.input_size() - num_scan_inputs : np.input_size();
      for (size_t f = 0; f < b.formal_inputs.size() && body != nullptr; ++f) {
        if (f < first_carried) {  // declared without a shape: a scalar, as ONNX says
          if (!body->input(static_cast<int>(f)).type().tensor_type().has_shape())
            sub.input_shapes[b.formal_inputs[f]] = {};
          continue;
        }
        const ValueId v =
            static_cast<int>(f) < np.input_size() ? graph.FindValue(np.input(static_cast<int>(f))) : kNoValue;
        if (v == kNoValue || !graph.value(v).type.rank_known) continue;
        Shape shape = graph.value(v).type.shape;
        for (int64_t& d : shape)
          if (d < 0) d = o.free_dim;
        if (static_cast<int64_t>(f) >= first_scanned) {  // a scan input's element
          const size_t j = f - static_cast<size_t>(first_scanned);
          int64_t axis = j < scan_axes.size() ? scan_axes[j] : 0;
          if (axis < 0) axis += static_cast<int64_t>(shape.size());
          if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) continue;
          shape.erase(shape.begin() + axis);
        }
        sub.input_shapes[b.formal_inputs[f]] = shape;
      }
      for (const std::string& name : b.inputs) {
        if (sub.input_shapes.count(name)) continue;  // a body's own
        const ValueId v = graph.FindValue(name);
        if (v == kNoValue || !graph.value(v).type.rank_known) continue;
        Shape shape = graph.value(v).type.shape;
        for (int64_t& d : shape)
          if (d < 0) d = o.free_dim;
        sub.input_shapes[name] = shape;
        if (o.input_data.count(name)) sub.input_data[name] = o.input_data.at(name);
      }
      sub.log = [log = o.log, label](bool warning, const std::string& line) {
        if (log) log(warning, "[" + label + "] " + line);
      };
      r.info("optimising the " + label + " (" + std::to_string(b.nodes) + " nodes) as a model of its own");
      try {
        const PipelineResult s = RunPipeline(sub);
        r.branch_search_s += s.search.seconds;
        for (const RetryRecord& retry : s.retries) r.branch_search_s += retry.seconds;
        // Its run wrote the branch as it came unless its graph was written,
        // or If branches inside it were optimised.
        const bool as_it_came = (s.check.unchanged || s.verdict.keep_original) && !s.branches.changed();
        // (with the nodes a Loop body's model left outside it)
        br.nodes_after = as_it_came ? b.nodes : s.finish.after.nodes + static_cast<int>(b.outside_nodes.size());
        br.measured = !s.check.unchanged && s.verdict.pairs > 0;
        br.verdict = s.verdict;
        if (s.verdict.guarded)
          br.guard = Format("in %s %s (%.3fx)", s.verdict.guard_device.c_str(), s.verdict.guard.OutcomeName().c_str(),
                            s.verdict.guard.wall.median);
        if (as_it_came) {
          br.outcome = "unchanged";
        } else {
          onnx::ModelProto optimised;
          if (!optimised.ParseFromString(ReadFile(out, "the optimised branch")))
            Fail("the optimised branch '", out, "' does not parse");
          ReplaceSubgraph(&model, b, optimised, &r.branches_dir);
          br.outcome = "optimised";
          if (s.branches.optimised() > 0)
            br.note = Format("with %d optimised subgraph%s inside it", s.branches.optimised(),
                             s.branches.optimised() == 1 ? "" : "s");
        }
      } catch (const ModelFileChanged&) {
        throw;
      } catch (const std::exception& e) {  // rlflow::Error, or a library's
        br.outcome = "not optimised";
        br.note = e.what();
        r.warn("the " + label + " was not optimised: " + e.what());
      }
    }
    rec.branches.push_back(br);
  }
  // The branches' runs added to the timing cache file; the run's own cost
  // model takes their entries in before it writes the file.
  if (!cache.empty()) r.cost->LoadCache(cache);
  if (!rec.changed()) return;
  rec.dropped_initializers = DropUnreadInitializers(&model);
  const std::string path = r.branches_dir + "/rlflow-model.onnx";
  WriteFileAtomically(path, model.SerializeAsString());
  model.Clear();
  LoadedModel before;
  try {
    LoadedModel with = ImportModelFile(r, path);
    with.source = r.model.source;
    before = std::move(as_it_came ? *as_it_came : r.model);
    r.model = std::move(with);
  } catch (const Error& e) {
    if (as_it_came) r.model = std::move(*as_it_came);
    PutBack(rec, std::string("the model with it does not import: ") + e.what());
    r.warn(std::string("the model with its optimised subgraphs does not import (") + e.what() +
           "): the subgraphs are kept as they were");
    return;
  }
  CheckInModel(r, std::move(before));
}

void DescribeBranches(const PipelineResult& p, std::string& s, nlohmann::ordered_json& j) {
  const BranchesRecord& rec = p.branches;
  if (!rec.note.empty()) s += "branches:   " + rec.note + "\n";
  auto hoisted = nlohmann::ordered_json::array();
  for (const HoistedLoop& h : rec.hoisted) {
    s += Format("hoisted:    %s '%s': %d body nodes (%d MatMul or Gemm) computed once before it, %d read by row\n",
                h.op.c_str(), h.node_name.c_str(), h.nodes, h.matmuls, h.new_inputs);
    hoisted.push_back({{"op", h.op},
                       {"node", h.node_name},
                       {"nodes", h.nodes},
                       {"matmuls", h.matmuls},
                       {"read_by_row", h.new_inputs},
                       {"ops", h.ops}});
  }
  if (!rec.hoist_note.empty()) s += "hoisted:    " + rec.hoist_note + "\n";
  if (!rec.hoisted.empty() || !rec.hoist_note.empty())
    j["hoisted"] = {{"loops", hoisted}, {"max_relative_error", rec.hoist_error}, {"note", rec.hoist_note}};
  auto list = nlohmann::ordered_json::array();
  for (const BranchRecord& b : rec.branches) {
    std::string line =
        Format("branch:     %s '%s' %s: %s", b.op.c_str(), b.node.c_str(), b.attribute.c_str(), b.outcome.c_str());
    if (b.outcome == "optimised") line += Format(", %d -> %d nodes", b.nodes_before, b.nodes_after);
    if (b.measured) line += ", " + b.verdict.ToString();
    if (!b.guard.empty()) line += ", " + b.guard;
    if (!b.note.empty()) line += " (" + b.note + ")";
    s += line + "\n";
    nlohmann::ordered_json one = {{"op", b.op},
                                  {"node", b.node},
                                  {"attribute", b.attribute},
                                  {"outcome", b.outcome},
                                  {"nodes_before", b.nodes_before},
                                  {"nodes_after", b.nodes_after},
                                  {"time_limit_s", b.time_limit_s},
                                  {"note", b.note}};
    if (b.measured) one["verdict"] = VerdictJson(b.verdict);
    if (!b.guard.empty()) one["guard"] = b.guard;
    list.push_back(one);
  }
  for (const BranchesRecord::ModelCheck& c : rec.checks)
    s += Format("branches:   in %s inside the model%s: %s\n", rec.check_device.c_str(),
                c.condition.empty() ? "" : (" (" + c.condition + ")").c_str(), c.verdict.ToString().c_str());
  if (!rec.check_note.empty()) s += "branches:   " + rec.check_note + "\n";
  if (!rec.branches.empty() || !rec.note.empty()) {
    auto checks = nlohmann::ordered_json::array();
    for (const BranchesRecord::ModelCheck& c : rec.checks) {
      nlohmann::ordered_json one = {{"condition", c.condition}};
      one.update(VerdictJson(c.verdict));
      checks.push_back(one);
    }
    j["branches_check"] = {{"device", rec.check_device}, {"checks", checks}, {"note", rec.check_note}};
    j["branches"] = list;
    j["branches_note"] = rec.note;
    j["branches_dropped_initializers"] = rec.dropped_initializers;
  }
}

}  // namespace rlflow

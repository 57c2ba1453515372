#include "core/onnx_functions.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "core/onnx_detail.h"

namespace rlflow {

using onnx_detail::FreshNames;
using onnx_detail::IsDefault;

namespace {

// Bodies that call a function more than once grow exponentially with the
// nesting (F1 calls F2 twice, F2 calls F3 twice, ...): a call whose full
// expansion would take the graph past this many nodes stays a call.
constexpr int64_t kMaxInlinedGraphNodes = 1 << 20;

std::string DomainKey(const std::string& domain) { return IsDefault(domain) ? "" : domain; }

bool HasSubgraph(const onnx::NodeProto& n) {
  for (const auto& a : n.attribute())
    if (a.has_g() || a.graphs_size() > 0) return true;
  return false;
}

// Why `f` cannot be inlined into `model` ("" if it can).
std::string WhyNotInlined(const onnx::FunctionProto& f, const std::map<std::string, int64_t>& model_opsets) {
  // Fields ONNX 1.12 does not know (IR 9's attribute defaults, IR 10's
  // overloads and value_info) land in the unknown fields: what they mean for
  // the body cannot be honoured here.
  if (!f.GetReflection()->GetUnknownFields(f).empty())
    return "it uses fields newer than ONNX 1.12 (attribute defaults or overloads)";
  for (const auto& imp : f.opset_import()) {
    auto it = model_opsets.find(DomainKey(imp.domain()));
    if (it != model_opsets.end() && it->second != imp.version())
      return "its opset for domain '" + (imp.domain().empty() ? std::string("ai.onnx") : imp.domain()) + "' is " +
             std::to_string(imp.version()) + ", the model's " + std::to_string(it->second);
  }
  for (const auto& n : f.node())
    if (HasSubgraph(n)) return "its node '" + n.name() + "' (" + n.op_type() + ") holds a subgraph";
  return "";
}

// The body of `f` for one call: `call`'s inputs, outputs and attributes in
// place of the formal ones, other names fresh.
std::vector<onnx::NodeProto> ExpandOne(const onnx::NodeProto& call, const onnx::FunctionProto& f, FreshNames& fresh) {
  const std::string prefix = call.name().empty() ? f.name() : call.name();
  std::map<std::string, std::string> rename;
  for (int k = 0; k < f.input_size(); ++k) rename[f.input(k)] = k < call.input_size() ? call.input(k) : "";
  // A formal output that is also a formal input (the function returns its
  // input) keeps the input's name; an Identity below defines the output.
  for (int k = 0; k < f.output_size(); ++k)
    if (k < call.output_size() && !call.output(k).empty() && !rename.count(f.output(k)))
      rename[f.output(k)] = call.output(k);
  auto name_of = [&](const std::string& n) -> std::string {
    if (n.empty()) return n;
    auto it = rename.find(n);
    if (it != rename.end()) return it->second;
    return rename[n] = fresh.Fresh(prefix + "/" + n);
  };
  std::map<std::string, const onnx::AttributeProto*> given;
  for (const auto& a : call.attribute()) given[a.name()] = &a;
  std::vector<onnx::NodeProto> body;
  std::set<std::string> produced;
  for (const auto& n : f.node()) {
    onnx::NodeProto m = n;
    m.set_name(fresh.Fresh(prefix + "/" + (n.name().empty() ? n.op_type() : n.name())));
    for (auto& in : *m.mutable_input()) in = name_of(in);
    for (auto& out : *m.mutable_output()) {
      out = name_of(out);
      produced.insert(out);
    }
    m.clear_attribute();
    for (const auto& a : n.attribute()) {
      if (!a.has_ref_attr_name()) {
        *m.add_attribute() = a;
        continue;
      }
      auto it = given.find(a.ref_attr_name());
      if (it == given.end()) continue;  // not given: the attribute is unset
      onnx::AttributeProto* b = m.add_attribute();
      *b = *it->second;
      b->set_name(a.name());
    }
    body.push_back(std::move(m));
  }
  // A formal output no body node produces (the function returns one of its
  // inputs): an Identity defines the call's output.
  for (int k = 0; k < f.output_size() && k < call.output_size(); ++k) {
    if (call.output(k).empty() || produced.count(call.output(k))) continue;
    onnx::NodeProto id;
    id.set_op_type("Identity");
    id.set_name(fresh.Fresh(prefix + "/" + f.output(k) + "_identity"));
    id.add_input(name_of(f.output(k)));
    id.add_output(call.output(k));
    body.push_back(std::move(id));
  }
  return body;
}

class Inliner {
 public:
  explicit Inliner(onnx::ModelProto* model) : model_(model) {
    for (const auto& imp : model->opset_import()) model_opsets_[DomainKey(imp.domain())] = imp.version();
    for (const auto& f : model->functions()) {
      functions_[{DomainKey(f.domain()), f.name()}] = &f;
      why_not_[&f] = WhyNotInlined(f, model_opsets_);
    }
    for (const auto& f : model->functions())
      if (why_not_[&f].empty() && CallsItself(&f))
        why_not_[&f] = "it calls itself (directly or through other functions), which ONNX does not allow";
    // A domain the model does not import is imported at the version the
    // first function that uses it names; a function naming another version
    // would be read at the wrong one.
    std::map<std::string, int64_t> added;
    for (const auto& f : model->functions()) {
      if (!why_not_[&f].empty()) continue;
      for (const auto& imp : f.opset_import()) {
        const std::string d = DomainKey(imp.domain());
        if (model_opsets_.count(d)) continue;
        auto [it, first] = added.emplace(d, imp.version());
        if (!first && it->second != imp.version())
          why_not_[&f] = "its opset for domain '" + imp.domain() + "' is " + std::to_string(imp.version()) +
                         ", another function's " + std::to_string(it->second);
      }
    }
    fresh_.Collect(model->graph());
  }

  // The function `n` calls and that may be inlined, else null. A node with
  // fields ONNX 1.12 does not know (an overload) calls another function.
  const onnx::FunctionProto* Inlinable(const onnx::NodeProto& n) const {
    const onnx::FunctionProto* f = Callee(n);
    if (f == nullptr || !why_not_.at(f).empty() || !n.GetReflection()->GetUnknownFields(n).empty()) return nullptr;
    return f;
  }

  // Nodes one call of `f` becomes, fully inlined (at most kMaxInlinedGraphNodes + 1).
  int64_t ExpandedSize(const onnx::FunctionProto* f) {
    auto it = size_.find(f);
    if (it != size_.end()) return it->second;
    int64_t size = f->output_size();  // room for Identities of returned inputs
    for (const auto& n : f->node()) {
      const onnx::FunctionProto* g = Inlinable(n);
      size = std::min<int64_t>(size + (g ? ExpandedSize(g) : 1), kMaxInlinedGraphNodes + 1);
    }
    return size_[f] = size;
  }

  // `call` of `f`, inlined with the calls in its body, appended to `out`.
  void Expand(const onnx::NodeProto& call, const onnx::FunctionProto& f,
              google::protobuf::RepeatedPtrField<onnx::NodeProto>* out) {
    ++inlined_[&f];
    for (auto& n : ExpandOne(call, f, fresh_)) {
      const onnx::FunctionProto* g = Inlinable(n);
      if (g != nullptr)
        Expand(n, *g, out);  // the call graph is acyclic: as deep as the functions' nesting
      else
        out->Add(std::move(n));
    }
  }

  int Run(std::vector<std::string>* notes) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    int64_t size = model_->graph().node_size();
    std::set<const onnx::FunctionProto*> too_large;
    for (auto& n : *model_->mutable_graph()->mutable_node()) {
      const onnx::FunctionProto* f = Inlinable(n);
      if (f != nullptr && size - 1 + ExpandedSize(f) > kMaxInlinedGraphNodes) {
        too_large.insert(f);
        f = nullptr;
      }
      if (f == nullptr) {
        nodes.Add(std::move(n));
        continue;
      }
      const int before = nodes.size();
      Expand(n, *f, &nodes);
      size += nodes.size() - before - 1;
    }
    model_->mutable_graph()->mutable_node()->Swap(&nodes);
    // Domains the bodies use that the model did not import.
    for (const auto& [f, count] : inlined_)
      for (const auto& imp : f->opset_import())
        if (!model_opsets_.count(DomainKey(imp.domain()))) {
          *model_->add_opset_import() = imp;
          model_opsets_[DomainKey(imp.domain())] = imp.version();
        }
    if (notes != nullptr) {
      std::map<const onnx::FunctionProto*, int> kept;
      for (const auto& n : model_->graph().node())
        if (const onnx::FunctionProto* f = Callee(n)) ++kept[f];
      // In the order the model defines the functions.
      for (const auto& def : model_->functions()) {
        const onnx::FunctionProto* f = &def;
        const std::string name = (f->domain().empty() ? "" : f->domain() + ".") + f->name();
        if (inlined_.count(f))
          notes->push_back("inlined " + std::to_string(inlined_[f]) + " call(s) of local function " + name);
        if (kept.count(f))
          notes->push_back(std::to_string(kept[f]) + " call(s) of local function " + name + " kept opaque: " +
                           (!why_not_[f].empty() ? why_not_[f]
                            : too_large.count(f) ? "inlining would make the graph larger than " +
                                                       std::to_string(kMaxInlinedGraphNodes) + " nodes"
                                                 : "a call with fields newer than ONNX 1.12 (an overload)"));
      }
    }
    int calls = 0;
    for (const auto& [f, count] : inlined_) calls += count;
    return calls;
  }

 private:
  const onnx::FunctionProto* Callee(const onnx::NodeProto& n) const {
    auto it = functions_.find({DomainKey(n.domain()), n.op_type()});
    return it == functions_.end() ? nullptr : it->second;
  }

  bool CallsItself(const onnx::FunctionProto* f) const {
    std::set<const onnx::FunctionProto*> seen;
    std::vector<const onnx::FunctionProto*> todo = {f};
    while (!todo.empty()) {
      const onnx::FunctionProto* g = todo.back();
      todo.pop_back();
      for (const auto& n : g->node()) {
        const onnx::FunctionProto* h = Callee(n);
        if (h == f) return true;
        if (h != nullptr && seen.insert(h).second) todo.push_back(h);
      }
    }
    return false;
  }

  onnx::ModelProto* model_;
  std::map<std::string, int64_t> model_opsets_;
  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*> functions_;
  std::map<const onnx::FunctionProto*, std::string> why_not_;
  std::map<const onnx::FunctionProto*, int64_t> size_;
  std::map<const onnx::FunctionProto*, int> inlined_;
  FreshNames fresh_;
};

}  // namespace

int InlineLocalFunctions(onnx::ModelProto* model, std::vector<std::string>* notes) {
  if (model->functions_size() == 0) return 0;
  return Inliner(model).Run(notes);
}

}  // namespace rlflow

#include "optimiser/picture.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/file_util.h"
#include "core/subprocess.h"

namespace rlflow {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }
uint64_t HashString(const std::string& s) { return std::hash<std::string>()(s); }

// A node's operator and attributes (tensor attributes left out), salted so
// that the three kinds of node hash below never collide with each other.
uint64_t OpHash(const Node& n, uint64_t salt) {
  uint64_t h = Mix(HashString(n.domain), HashString(n.op) * salt);
  for (const auto& [name, attr] : n.attrs)
    if (attr.type != AttrType::kTensor && attr.type != AttrType::kOther)
      h = Mix(Mix(h, HashString(name)), HashString(attr.ToString()));
  return h;
}

// Per node: a hash of what it computes (operator, attributes, and the hashes
// of what feeds it, down to the graph inputs and weights).
std::vector<uint64_t> NodeHashes(const Graph& g) {
  std::vector<uint64_t> value_hash(g.num_values(), 0), node_hash(g.num_nodes(), 0);
  for (ValueId v = 0; v < g.num_values(); ++v) {
    const Value& val = g.value(v);
    if (val.producer == kNoNode) value_hash[v] = Mix(HashString(val.name), HashString(val.type.ToString()));
  }
  for (NodeId id : g.TopologicalOrder()) {
    const Node& n = g.node(id);
    uint64_t h = OpHash(n, 1);
    for (ValueId in : n.inputs) h = Mix(h, in == kNoValue ? 7 : value_hash[in]);
    node_hash[id] = h;
    for (size_t k = 0; k < n.outputs.size(); ++k) value_hash[n.outputs[k]] = Mix(h, k + 1);
  }
  return node_hash;
}

// Per node: a hash of where its results go (operator, attributes, and per
// output the consumers' hashes with the input slot, or the graph output's
// name), so that nodes after a rewritten region, whose inputs changed, are
// still recognised.
std::vector<uint64_t> DownstreamHashes(const Graph& g) {
  std::vector<uint64_t> node_hash(g.num_nodes(), 0);
  const std::vector<std::vector<std::pair<NodeId, int>>> consumers = g.Consumers();
  std::vector<char> is_output(g.num_values(), 0);
  for (ValueId v : g.outputs()) is_output[v] = 1;
  std::vector<NodeId> order = g.TopologicalOrder();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node& n = g.node(*it);
    uint64_t h = OpHash(n, 31);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const ValueId v = n.outputs[k];
      std::vector<uint64_t> uses;
      for (const auto& [c, slot] : consumers[v]) uses.push_back(Mix(node_hash[c], static_cast<uint64_t>(slot) + 1));
      if (is_output[v]) uses.push_back(HashString("output:" + g.value(v).name));
      std::sort(uses.begin(), uses.end());
      uint64_t o = k + 101;
      for (uint64_t u : uses) o = Mix(o, u);
      h = Mix(h, o);
    }
    node_hash[*it] = h;
  }
  return node_hash;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// One side's cluster: its changed nodes (at most max) and their unchanged
// neighbours. Returns the number of changed nodes.
// A node is unchanged when the other graph has a node with the same
// upstream hash (computes the same thing), the same downstream hash (feeds
// the same things), or the same operator, attributes and input and output
// names (rewrites keep the names of what they do not touch).
std::vector<uint64_t> NameHashes(const Graph& g) {
  std::vector<uint64_t> out(g.num_nodes(), 0);
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    uint64_t h = OpHash(n, 17);
    for (ValueId in : n.inputs) h = Mix(h, in == kNoValue ? 7 : HashString("in:" + g.value(in).name));
    for (ValueId v : n.outputs) h = Mix(h, HashString("out:" + g.value(v).name));
    out[id] = h;
  }
  return out;
}

struct Hashes {
  std::vector<uint64_t> up, down, names;
  std::unordered_set<uint64_t> up_set, down_set, name_set;
  explicit Hashes(const Graph& g) : up(NodeHashes(g)), down(DownstreamHashes(g)), names(NameHashes(g)) {
    up_set.insert(up.begin(), up.end());
    down_set.insert(down.begin(), down.end());
    name_set.insert(names.begin(), names.end());
  }
  bool Has(const Hashes& o, NodeId id) const {
    return up_set.count(o.up[id]) || down_set.count(o.down[id]) || name_set.count(o.names[id]);
  }
};

int Side(std::ostringstream& os, const Graph& g, const Hashes& mine, const Hashes& other, const std::string& prefix,
         const std::string& title, const std::string& colour, int max) {
  std::vector<char> changed(g.num_nodes(), 0), shown(g.num_nodes(), 0);
  int n_changed = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (!other.Has(mine, id)) {
      changed[id] = 1;
      if (n_changed++ < max) shown[id] = 1;
    }
  // Context: unchanged producers and consumers of shown changed nodes.
  const std::vector<std::vector<std::pair<NodeId, int>>> consumers = g.Consumers();
  std::vector<char> context(g.num_nodes(), 0);
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    if (!shown[id]) continue;
    for (ValueId in : g.node(id).inputs)
      if (in != kNoValue && g.value(in).producer != kNoNode && !changed[g.value(in).producer])
        context[g.value(in).producer] = 1;
    for (ValueId out : g.node(id).outputs)
      for (const auto& [c, slot] : consumers[out])
        if (!changed[c]) context[c] = 1;
  }
  os << "  subgraph cluster_" << prefix << " {\n    label=\"" << Escape(title) << " (" << n_changed << " node"
     << (n_changed == 1 ? "" : "s") << " rewritten"
     << (n_changed > max ? ", first " + std::to_string(max) + " drawn" : "") << ")\";\n    fontsize=14;\n";
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    if (!shown[id] && !context[id]) continue;
    const Node& n = g.node(id);
    os << "    " << prefix << id << " [shape=box,style=filled,fillcolor=\"" << (shown[id] ? colour : "#eeeeee")
       << "\",fontcolor=\"" << (shown[id] ? "black" : "#777777") << "\",label=\"" << Escape(n.op) << "\"];\n";
  }
  os << "  }\n";
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    if (!shown[id] && !context[id]) continue;
    for (ValueId in : g.node(id).inputs) {
      if (in == kNoValue) continue;
      const NodeId p = g.value(in).producer;
      if (p != kNoNode && (shown[p] || context[p]) && (shown[p] || shown[id]))
        os << "  " << prefix << p << " -> " << prefix << id << " [label=\"" << Escape(g.value(in).type.ToString())
           << "\",fontsize=8];\n";
    }
  }
  return n_changed;
}

}  // namespace

std::string RewritePictureDot(const Graph& before, const Graph& after, const std::vector<std::string>& rules,
                              const PictureOptions& o) {
  if (o.max_nodes < 1) Fail("picture: max_nodes must be >= 1");
  const Hashes hb(before), ha(after);
  std::ostringstream os;
  os << "digraph rewrites {\n  rankdir=TB;\n  newrank=true;\n  node [fontsize=10];\n";
  std::string caption = "Rules applied:";
  for (const std::string& r : rules) caption += "\\l" + Escape(r);
  if (rules.empty()) caption += "\\lnone";
  os << "  label=\"" << caption << "\\l\";\n  labelloc=t;\n  labeljust=l;\n  fontsize=12;\n";
  Side(os, before, hb, ha, "b", "before: " + before.info().graph_name, "#f4b6b6", o.max_nodes);
  Side(os, after, ha, hb, "a", "after", "#b6e3b6", o.max_nodes);
  os << "}\n";
  return os.str();
}

void WritePng(const std::string& dot_text, const std::string& path) {
  const std::string dir = path.substr(0, path.find_last_of('/') + 1);
  const std::string stem = (dir.empty() ? "./" : dir) + ".rlflow-picture-" + std::to_string(::getpid());
  const std::string dot_path = stem + ".dot", png_path = stem + ".png", log = stem + ".log";
  WriteFileAtomically(dot_path, dot_text);
  const int rc = RunProgram({"dot", "-Tpng", "-o", png_path, dot_path}, log);
  std::string err = FileExists(log) ? ReadFile(log) : "";
  std::remove(dot_path.c_str());
  std::remove(log.c_str());
  if (rc != 0) {
    std::remove(png_path.c_str());
    if (rc == 127) Fail("--picture: Graphviz's dot was not found (Debian package graphviz; ./bazelw installs it)");
    const size_t nl = err.find('\n');
    Fail("--picture: dot failed (exit ", rc, "): ", nl == std::string::npos ? err : err.substr(0, nl));
  }
  // Copied, not renamed: the path may be a symlink or /dev/stdout.
  std::string png;
  try {
    png = ReadFile(png_path);
    std::remove(png_path.c_str());
  } catch (...) {
    std::remove(png_path.c_str());
    throw;
  }
  WriteFileAtomically(path, png);
}

}  // namespace rlflow

#include "search/search.h"

#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "core/error.h"
#include "core/strings.h"

namespace rlflow {
namespace {

std::map<std::string, SearchFactory>& Registry() {
  static auto* registry = new std::map<std::string, SearchFactory>();
  return *registry;
}

// --search=none: import, check, export.
class NoSearch : public Search {
 public:
  std::string name() const override { return "none"; }
  std::string description() const override { return "no search: import, check, export"; }
  SearchResult Explore(const Graph& graph, const SearchOptions& options, Runner&) override {
    SearchResult r;
    r.graph = graph;
    r.graphs_explored = 1;
    if (options.cost != nullptr) r.initial_cost = r.final_cost = options.cost->GraphCost(graph);
    r.stop_reason = StopReason::kNoSearch;
    return r;
  }
};
RLFLOW_REGISTER_SEARCH("none", NoSearch);

}  // namespace

SearchParams& SearchParams::Set(const std::string& name, std::string value) {
  values_[name] = std::move(value);
  return *this;
}

const std::string& SearchParams::Text(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) Fail("search setting '", name, "' is not set");
  return it->second;
}

int64_t SearchParams::Int(const std::string& name, int64_t min) const {
  const std::string& text = Text(name);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0) Fail("--", name, ": '", text, "' is not an integer");
  if (v < min) Fail("--", name, " must be >= ", min, ", got ", v);
  return v;
}

double SearchParams::Double(const std::string& name, double min) const {
  const std::string& text = Text(name);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v == v)) Fail("--", name, ": '", text, "' is not a number");
  if (!(v >= min)) Fail("--", name, " must be >= ", min, ", got ", text);
  return v;
}

std::vector<std::string> SearchParams::List(const std::string& name) const { return SplitList(Text(name)); }

SearchParams ParseSearchParams(const std::string& text) {
  SearchParams p;
  for (const std::string& item : SplitList(text, ';')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      Fail("--search_param: '", item, "' is not NAME=VALUE (several: NAME=VALUE;NAME=VALUE)");
    const std::string name = item.substr(0, eq);
    if (p.Has(name)) Fail("--search_param: '", name, "' is given twice");
    p.Set(name, item.substr(eq + 1));
  }
  return p;
}

SearchOptions Search::Resolve(const SearchOptions& options) const {
  const std::vector<SearchParam> declared = Params();
  std::string known;
  for (const SearchParam& d : declared) known += (known.empty() ? "" : ", ") + d.name;
  for (const auto& [given, value] : options.params.values()) {
    bool found = false;
    for (const SearchParam& d : declared) found |= d.name == given;
    if (!found)
      Fail("--search=", name(), " has no setting '", given, "' (",
           known.empty() ? std::string("it has none") : "its settings: " + known, ")");
  }
  SearchOptions o = options;
  for (const SearchParam& d : declared)
    if (!o.params.Has(d.name)) o.params.Set(d.name, d.default_value);
  if (o.budget < 0) Fail("--budget must be >= 0, got ", o.budget);
  if (!(o.max_growth >= 1.0)) Fail("the node growth limit must be >= 1, got ", o.max_growth);
  CheckParams(o);
  o.resolved_by = name();
  return o;
}

SearchResult Search::Run(const Graph& graph, const SearchOptions& options) {
  Runner unlimited;
  Runner& runner = options.runner != nullptr ? *options.runner : unlimited;
  // Options the pipeline resolved before any long work are not checked again.
  SearchOptions o = options.resolved_by == name() ? options : Resolve(options);
  o.runner = &runner;
  SearchResult r = Explore(graph, o, runner);
  // A result the options do not accept (a search that does not ask, as the
  // learned agents' episodes): the start graph instead.
  if (o.acceptable && !r.judged && !r.applied.empty() && r.graph.StructuralHash() != graph.StructuralHash()) {
    ++r.graphs_judged;
    if (!o.acceptable(r.graph)) {
      ++r.graphs_refused;
      r.graph = graph;
      r.applied.clear();
      r.finish_applied = 0;
      r.final_cost = r.initial_cost;
    }
  }
  // The runner's limits stop every search the same way, whichever loop
  // noticed first.
  if (const StopReason why = runner.Check(); why != StopReason::kNone) r.stop_reason = why;
  return r;
}

bool RegisterSearch(const std::string& name, SearchFactory factory) {
  RLFLOW_CHECK(!Registry().count(name), "search '", name, "' registered twice");
  Registry()[name] = std::move(factory);
  return true;
}

std::vector<std::string> SearchNames() {
  std::vector<std::string> names;
  for (const auto& [name, f] : Registry()) names.push_back(name);
  return names;
}

std::string DescribeSearches() {
  std::string out;
  for (const auto& name : SearchNames()) {
    std::unique_ptr<Search> s = MakeSearch(name);
    out += name + ": " + s->description() + "\n";
    for (const SearchParam& p : s->Params())
      out += "    " + p.name + " (default '" + p.default_value + "'): " + p.help + "\n";
  }
  return out;
}

std::unique_ptr<Search> MakeSearch(const std::string& name) {
  auto it = Registry().find(name);
  if (it != Registry().end()) return it->second();
  std::string known;
  for (const auto& n : SearchNames()) known += (known.empty() ? "" : ", ") + n;
  Fail("unknown --search '", name, "' (available: ", known, ")");
}

void CheckSearchOptions(const SearchOptions& o) {
  if (o.matcher == nullptr) Fail("search: no rules (matcher) given");
  if (o.cost == nullptr) Fail("search: no cost model given");
}

void GreedyFinish(SearchResult* r, const SearchOptions& o) {
  if (!o.greedy_finish || IsRunnerStop(r->stop_reason)) return;
  SearchOptions greedy = o;
  greedy.params = SearchParams();  // the finisher's own settings are its defaults
  SearchResult f = MakeSearch("greedy")->Run(r->graph, greedy);
  if (f.final_cost < r->final_cost) {
    r->graph = std::move(f.graph);
    r->applied.insert(r->applied.end(), f.applied.begin(), f.applied.end());
    r->finish_applied = static_cast<int64_t>(f.applied.size());
    r->judged = f.judged;  // greedy moved: to a graph it may return
    // The greedy search costs from its own start: carry its gain over.
    r->final_cost -= f.initial_cost - f.final_cost;
  }
  static_cast<SearchWork&>(*r) += f;
  if (IsRunnerStop(f.stop_reason)) r->stop_reason = f.stop_reason;
}

}  // namespace rlflow

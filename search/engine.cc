#include "search/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "core/error.h"
#include "core/node_key.h"
#include "core/passes/fold_constants.h"
#include "core/summary.h"

namespace rlflow {
namespace {

// The noise of a rewrite's estimated gain: its nodes' timing noise added in
// quadrature per cost key, weighted by how many more nodes of that key one
// side has than the other (a key on both sides has one timing: it cancels).
double Noise(const std::vector<std::pair<uint64_t, double>>& removed,
             const std::vector<std::pair<uint64_t, double>>& added) {
  std::map<uint64_t, std::pair<int, double>> net;
  for (const auto& [k, noise] : removed) {
    net[k].first += 1;
    net[k].second = noise;
  }
  for (const auto& [k, noise] : added) {
    net[k].first -= 1;
    net[k].second = noise;
  }
  double total = 0;
  for (const auto& [k, p] : net) total += (p.first * p.second) * (p.first * p.second);
  return std::sqrt(total);
}

// Data for a match's inputs that the graph computes from weights
// (`input_constant`, not initializers): their known values, else zeros of
// their shape (only the shape matters for timing; at most
// TensorData::kMaxTimingZeros elements, a larger one stays an input).
// nullptr: the input as in the graph (Matcher::Replacement, Matched).
std::vector<TensorDataPtr> ComputedWeights(const Graph& g, const Match& m, const std::vector<char>& input_constant) {
  std::vector<TensorDataPtr> weights(m.inputs.size());
  for (size_t k = 0; k < m.inputs.size(); ++k) {
    const Value& v = g.value(m.inputs[k]);
    if (!input_constant[k] || v.initializer) continue;
    weights[k] = v.known ? v.known
                 : v.type.IsStatic() && v.type.NumElements() <= TensorData::kMaxTimingZeros
                     ? std::make_shared<const TensorData>(TensorData::Zeros(v.type))
                     : nullptr;
  }
  return weights;
}

}  // namespace

// ---------------------------------------------------------------- RewriteState

double RewriteState::cost() const {
  if (!cost_) {
    cost_ = engine_->o_.cost->GraphCost(*graph_) + adjust_;
    if (surroundings_ != 0) engine_->estimate_error_[surroundings_] = *cost_ - estimate_;
  }
  return *cost_;
}

const std::shared_ptr<const std::vector<Match>>& RewriteState::SharedMatches() const {
  if (!matches_) {
    const Matcher& m = *engine_->o_.matcher;
    matches_ = std::make_shared<const std::vector<Match>>(
        parent_matches_ && info_ ? m.FindAllAfter(*graph_, *parent_matches_, *info_) : m.FindAll(*graph_));
    parent_matches_.reset();
    info_.reset();
  }
  return matches_;
}

const std::vector<Match>& RewriteState::Matches() const { return *SharedMatches(); }

std::vector<Candidate> RewriteState::Candidates() const {
  const std::vector<Match>& matches = Matches();
  std::vector<char> weight_only = WeightOnlyNodes(*graph_);
  RewriteEngine::NodeMemo memo(graph_->num_nodes());  // per-node costs, computed on demand
  const EngineOptions& o = engine_->o_;
  std::vector<Candidate> out;
  out.reserve(matches.size());
  const double started = o.runner != nullptr ? o.runner->Elapsed() : 0.0;
  double polled = started;
  for (size_t i = 0; i < matches.size(); ++i) {
    // Long steps (a graph with thousands of matches) stay interruptible, and
    // one whose costing alone outlasts the progress interval says so (every
    // graph's line would take the place of the search's own: a user saw
    // "costing rewrites (255 of 520)" every 2 s and never the search's).
    // Polled by the clock as well as by count: a match whose new keys are
    // timed can take a second (ResNet-50 at batch 16: the first graph's 255
    // matches took 60 s, no line shown and Ctrl-C unanswered).
    if (o.runner != nullptr && ((i & 255) == 255 || o.runner->Elapsed() - polled >= 0.25)) {
      polled = o.runner->Elapsed();
      if (o.runner->ShouldStop()) break;
      if (polled - started >= o.runner->progress_interval_s())
        o.runner->Report(
            [&] { return "costing rewrites (" + std::to_string(i) + " of " + std::to_string(matches.size()) + ")"; });
    }
    std::optional<Candidate> c = engine_->Estimate(*this, matches[i], weight_only, &memo);
    if (c) out.push_back(std::move(*c));
  }
  return out;
}

std::optional<Candidate> RewriteState::EstimateCost(const Match& match) const {
  std::vector<char> weight_only = WeightOnlyNodes(*graph_);
  RewriteEngine::NodeMemo memo(graph_->num_nodes());
  return engine_->Estimate(*this, match, weight_only, &memo);
}

std::optional<RewriteState> RewriteState::Apply(const Candidate& candidate) const {
  auto info = std::make_shared<ApplyInfo>();
  // A rewrite whose result is invalid (a cycle, a type change) is refused
  // as a value: the common case on the search's hot path, no exception.
  std::optional<Graph> applied;
  try {
    applied = engine_->o_.matcher->TryApply(*graph_, candidate.match, info.get());
  } catch (const Error&) {
    // A replacement that does not build here although its cost did (a shape
    // rule failing on this match's symbols): as rare as it is, still no result.
    applied.reset();
  }
  if (!applied) {
    ++engine_->stats_.rewrites_rejected;
    return std::nullopt;
  }
  std::shared_ptr<const Graph> next = std::make_shared<const Graph>(std::move(*applied));
  ++engine_->stats_.rewrites_applied;
  if (engine_->o_.runner != nullptr) engine_->o_.runner->CountSteps();
  RewriteState s;
  s.engine_ = engine_;
  s.graph_ = std::move(next);
  s.adjust_ = adjust_ + candidate.adjust;
  s.surroundings_ = candidate.surroundings;
  s.estimate_ = candidate.cost - candidate.correction;
  s.steps_ = steps_ + 1;
  s.history_ = std::make_shared<const History>(History{engine_->MatchName(candidate.match), history_});
  s.parent_matches_ = SharedMatches();
  s.info_ = std::move(info);
  return s;
}

std::vector<std::string> RewriteState::Applied() const {
  std::vector<std::string> out;
  for (const History* p = history_.get(); p != nullptr; p = p->parent.get()) out.push_back(p->rule);
  return {out.rbegin(), out.rend()};
}

// ---------------------------------------------------------------- RewriteEngine

RewriteEngine::RewriteEngine(EngineOptions options) : o_(std::move(options)) {
  if (o_.matcher == nullptr) Fail("rewrite engine: no rules (matcher) given");
  if (o_.cost == nullptr) Fail("rewrite engine: no cost model given");
}

RewriteState RewriteEngine::Start(const Graph& graph, std::optional<double> cost) {
  return Start(std::make_shared<const Graph>(graph), cost);
}

RewriteState RewriteEngine::Start(std::shared_ptr<const Graph> graph, std::optional<double> cost, double adjust) {
  RewriteState s;
  s.engine_ = this;
  s.graph_ = std::move(graph);
  s.adjust_ = adjust;
  s.cost_ = cost;
  return s;
}

std::string RewriteEngine::MatchName(const Match& match) const {
  const std::string& id = o_.matcher->rules().at(match.rule).id();
  return match.reverse ? id + " (reversed)" : id;
}

std::optional<Candidate> RewriteEngine::Estimate(const RewriteState& s, const Match& m,
                                                 const std::vector<char>& weight_only, NodeMemo* memo) {
  const Graph& g = *s.graph_;
  // Rewrites inside weight-only subgraphs change nothing that runs: those
  // subgraphs are folded into initializers before export.
  double removed = 0, removed_flops = 0;
  int removed_nodes = 0;
  // Noise per cost key (the same key on both sides has the same timing: its
  // error cancels).
  std::vector<std::pair<uint64_t, double>> removed_keys;
  bool runs = false;
  for (NodeId id : m.nodes) {
    if (weight_only[id]) continue;
    runs = true;
    if (memo->ms[id] < 0) {
      memo->ms[id] = o_.cost->NodeMs(g, id);
      memo->noise[id] = o_.cost->NodeNoiseMs(g, id);
      memo->key[id] = NodeKeyHash(g, id);
      memo->flops[id] = NodeFlops(g, id);
    }
    removed += memo->ms[id];
    removed_flops += memo->flops[id];
    ++removed_nodes;
    removed_keys.push_back({memo->key[id], memo->noise[id]});
  }
  if (!runs) return std::nullopt;
  // The replacement's cost depends only on the rule side and its inputs'
  // types and constness: computed once per such key.
  std::vector<char> input_constant(m.inputs.size());
  uint64_t key = HashCombine(static_cast<uint64_t>(m.rule) * 2 + (m.reverse ? 1 : 0), 0x5eed);
  for (size_t k = 0; k < m.inputs.size(); ++k) {
    ValueId v = m.inputs[k];
    const Value& val = g.value(v);
    input_constant[k] = g.IsConstant(v) || (val.producer != kNoNode && weight_only[val.producer]);
    key = HashCombine(HashCombine(key, ValueKeyHash(g, v)), input_constant[k]);
  }
  auto cached = replacement_cost_.find(key);
  if (cached == replacement_cost_.end()) {
    Graph rep;
    try {
      // Its weights as initializers (those computed from weights too), so
      // that what the replacement computes from them is weight-only there
      // too and its nodes are timed reading weights, as they run once
      // folded (ExtractNode).
      const std::vector<TensorDataPtr> weights = ComputedWeights(g, m, input_constant);
      rep = o_.matcher->Replacement(g, m, &weights);
    } catch (const Error&) {
      replacement_cost_.emplace(key, ReplacementCost{-1.0, 0, 0.0, {}, {}});
      ++stats_.rewrites_rejected;
      return std::nullopt;
    }
    // Replacement inputs computed from weights only are constants too.
    std::vector<char> constant(rep.num_values(), 0);
    for (size_t k = 0; k < input_constant.size(); ++k) constant[k] = input_constant[k];
    for (ValueId v = 0; v < rep.num_values(); ++v)
      if (rep.IsConstant(v)) constant[v] = 1;
    double added = 0, added_flops = 0;
    std::vector<std::pair<uint64_t, double>> added_keys;
    for (NodeId id = 0; id < rep.num_nodes(); ++id) {  // added in topological order
      const Node& n = rep.node(id);
      bool all = true;
      for (ValueId in : n.inputs)
        if (in != kNoValue && !constant[in]) all = false;
      if (all) {
        for (ValueId o : n.outputs) constant[o] = 1;
      } else {
        added += o_.cost->NodeMs(rep, id);
        added_flops += NodeFlops(rep, id);
        added_keys.push_back({NodeKeyHash(rep, id), o_.cost->NodeNoiseMs(rep, id)});
      }
    }
    std::vector<char> out_permuted;
    for (ValueId o : rep.outputs()) out_permuted.push_back(PermutedView(rep, o) ? 1 : 0);
    cached = replacement_cost_
                 .emplace(key, ReplacementCost{added, rep.num_nodes(), added_flops, std::move(added_keys),
                                               std::move(out_permuted)})
                 .first;
  }
  const ReplacementCost& rc = cached->second;
  if (rc.added < 0) return std::nullopt;  // the replacement does not infer
  if (o_.max_nodes > 0 && g.num_nodes() - static_cast<int64_t>(m.nodes.size()) + rc.nodes > o_.max_nodes)
    return std::nullopt;
  // The readers of the match's outputs stay, but where an output turns from
  // a permuted view into a contiguous tensor or back (a Transpose moved
  // across the match's boundary), each reader reads another layout: another
  // cost key, another time (the CPU executor's Transpose returns a view).
  double added = rc.added;
  std::vector<std::pair<uint64_t, double>> added_keys;
  const std::vector<ValueId> outputs = o_.matcher->MatchedOutputs(g, m);
  std::map<NodeId, std::map<std::string, bool>> readers;  // reader -> its inputs' layouts after (by value name)
  for (size_t k = 0; k < outputs.size() && k < rc.out_permuted.size(); ++k) {
    const bool after = rc.out_permuted[k] != 0;
    if (PermutedView(g, outputs[k]) == after) continue;
    if (!memo->consumers) memo->consumers = g.Consumers();
    for (const auto& [reader, slot] : (*memo->consumers)[outputs[k]])
      if (!weight_only[reader] && std::find(m.nodes.begin(), m.nodes.end(), reader) == m.nodes.end())
        readers[reader][g.value(outputs[k]).name] = after;
  }
  for (const auto& [reader, layouts] : readers) {
    // The reader alone, reading the outputs' layouts before and after.
    Graph alone = ExtractNode(g, reader);
    const NodeId only = 0;
    const double before_ms = o_.cost->NodeMs(alone, only);
    removed_keys.push_back({NodeKeyHash(alone, only), o_.cost->NodeNoiseMs(alone, only)});
    for (ValueId in : alone.node(only).inputs) {
      if (in == kNoValue) continue;
      auto it = layouts.find(alone.value(in).name);
      if (it != layouts.end()) alone.mutable_value(in).arrives_permuted = it->second;
    }
    added += o_.cost->NodeMs(alone, only) - before_ms;
    added_keys.push_back({NodeKeyHash(alone, only), o_.cost->NodeNoiseMs(alone, only)});
  }
  if (!added_keys.empty()) added_keys.insert(added_keys.end(), rc.keys.begin(), rc.keys.end());
  // The noise rule: a gain within the timings' noise is not a gain unless
  // the two sides, timed against each other, say so. Nor is the gain of a
  // replacement that runs more kernels to do no less work (a contraction
  // in halves, a bias moved out of a convolution): it rests on a
  // kernel running faster at other shapes, a few percent that separately
  // timed keys, taken minutes apart on a machine whose speed drifts, do
  // not resolve (BERT-Base's contractions of 768 in halves: estimated
  // faster, measured 2-4% slower).
  double gain = removed - added, used = gain;
  double noise = Noise(removed_keys, added_keys.empty() ? rc.keys : added_keys);
  const bool more_kernels = static_cast<int>(rc.keys.size()) > removed_nodes && rc.flops >= removed_flops;
  if (gain > 0 && gain <= noise)
    used = ResolvedGain(g, m, key, input_constant, gain, "within noise");
  else if (gain > 0 && more_kernels)
    used = ResolvedGain(g, m, key, input_constant, gain, "from more kernels doing the same work");
  // The surroundings: the replacement's key and the cost keys of the nodes
  // that read the match's outputs or write its inputs.
  if (!memo->consumers) memo->consumers = g.Consumers();
  auto neighbour = [&](NodeId id) {
    if (memo->key[id] == 0) memo->key[id] = NodeKeyHash(g, id);
    return memo->key[id];
  };
  uint64_t surroundings = HashCombine(key, 0x5a11);
  for (ValueId v : outputs)
    for (const auto& [reader, slot] : (*memo->consumers)[v])
      if (std::find(m.nodes.begin(), m.nodes.end(), reader) == m.nodes.end())
        surroundings = HashCombine(HashCombine(surroundings, neighbour(reader)), static_cast<uint64_t>(slot));
  for (ValueId v : m.inputs)
    if (g.value(v).producer != kNoNode) surroundings = HashCombine(surroundings, neighbour(g.value(v).producer));
  surroundings |= 1;  // never 0 (none)
  auto known = estimate_error_.find(surroundings);
  const double correction = known != estimate_error_.end() ? known->second : 0.0;
  return Candidate{m, s.cost() - used + correction, gain - used, surroundings, correction};
}

// The gain of a rewrite whose estimated gain is within noise, from the cost
// model's timing of the two sides against each other (once per replacement
// key: same rule side, input types and constness).
double RewriteEngine::ResolvedGain(const Graph& g, const Match& m, uint64_t key,
                                   const std::vector<char>& input_constant, double estimate, const char* why) {
  std::unordered_map<uint64_t, double>& resolved = Resolved();
  auto it = resolved.find(key);
  if (it == resolved.end()) {
    const auto started = std::chrono::steady_clock::now();
    double outcome = 0;  // an unresolvable pair is no gain
    try {
      // Inputs computed from weights become constants and weight-only work
      // is folded away on both sides, as in the written model.
      const std::vector<TensorDataPtr> constants = ComputedWeights(g, m, input_constant);
      Graph before = o_.matcher->Matched(g, m, &constants), after = o_.matcher->Replacement(g, m, &constants);
      FoldOptions fold;
      fold.max_elements = std::numeric_limits<int64_t>::max();
      InferShapesAndFold(before, fold);
      InferShapesAndFold(after, fold);
      const rules::Rule& rule = o_.matcher->rules().at(m.rule);
      char hex[24];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
      std::string ab_key = rule.id() + (m.reverse ? "<" : ">") + hex;
      // The outcome relative to the estimate: 1 = faster (estimate kept).
      outcome = o_.cost->ResolveGain(before, after, ab_key, 1.0);
    } catch (const Error&) {
      outcome = 0;
    }
    it = resolved.emplace(key, outcome).first;
    ++stats_.gains_resolved;
    stats_.gains_resolve_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (outcome == 1.0) ++stats_.gains_confirmed;
    char line[200];
    std::snprintf(line, sizeof line, "%s: estimated gain %.4f ms %s; timed A/B: %s", MatchName(m).c_str(), estimate,
                  why,
                  outcome == 1.0 ? "faster"
                  : outcome == 0 ? "no difference"
                                 : "slower");
    stats_.noise_rule.push_back(line);
  }
  return it->second == 1.0 ? estimate : it->second;
}

}  // namespace rlflow

#include "agents/gnn.h"

#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "agents/archive.h"
#include "core/error.h"

namespace rlflow::agents {
namespace {

namespace nn = torch::nn;

nn::Sequential Mlp(int in, int hidden, int out) {
  return nn::Sequential(nn::Linear(in, hidden), nn::ReLU(), nn::Linear(hidden, out));
}

// Sum of rows of `src` per index (rows of the result: `n`).
torch::Tensor SegmentSum(const torch::Tensor& src, const torch::Tensor& index, int64_t n) {
  return torch::zeros({n, src.size(1)}, src.options()).index_add_(0, index, src);
}

torch::Tensor SegmentMean(const torch::Tensor& src, const torch::Tensor& index, int64_t n) {
  torch::Tensor count =
      torch::zeros({n}, src.options()).index_add_(0, index, torch::ones({src.size(0)}, src.options()));
  return SegmentSum(src, index, n) / count.clamp_min(1).unsqueeze(1);
}

// Softmax of `score` [E] over the edges that share a destination.
torch::Tensor SegmentSoftmax(const torch::Tensor& score, const torch::Tensor& index, int64_t n) {
  torch::Tensor max =
      torch::full({n}, -1e30, score.options()).scatter_reduce(0, index, score.detach(), "amax", /*include_self=*/true);
  torch::Tensor e = torch::exp(score - max.index_select(0, index));
  torch::Tensor sum = torch::zeros({n}, score.options()).index_add_(0, index, e);
  return e / sum.index_select(0, index).clamp_min(1e-12);
}

}  // namespace

GraphBatch MakeBatch(const std::vector<const Observation*>& observations) {
  GraphBatch b;
  b.num_graphs = static_cast<int64_t>(observations.size());
  const int nf = NodeFeatureSize();
  int64_t n = 0, e = 0;
  for (const Observation* o : observations) {
    b.node_offset.push_back(n);
    n += o->num_nodes;
    e += o->num_edges;
  }
  std::vector<float> x, ea, g;
  std::vector<int64_t> src, dst, ng, eg;
  x.reserve(static_cast<size_t>(n) * nf);
  ea.reserve(static_cast<size_t>(e) * kEdgeFeatureSize);
  for (size_t k = 0; k < observations.size(); ++k) {
    const Observation& o = *observations[k];
    const int64_t off = b.node_offset[k];
    x.insert(x.end(), o.node_features.begin(), o.node_features.end());
    ea.insert(ea.end(), o.edge_features.begin(), o.edge_features.end());
    g.insert(g.end(), o.global_features.begin(), o.global_features.end());
    for (int i = 0; i < o.num_edges; ++i) {
      src.push_back(o.edge_src[i] + off);
      dst.push_back(o.edge_dst[i] + off);
      eg.push_back(static_cast<int64_t>(k));
    }
    for (int i = 0; i < o.num_nodes; ++i) ng.push_back(static_cast<int64_t>(k));
  }
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  b.x = torch::from_blob(x.data(), {n, nf}, f32).clone();
  b.edge_attr = torch::from_blob(ea.data(), {e, kEdgeFeatureSize}, f32).clone();
  b.global = torch::from_blob(g.data(), {b.num_graphs, kGlobalFeatureSize}, f32).clone();
  torch::Tensor s = torch::from_blob(src.data(), {e}, i64).clone(), d = torch::from_blob(dst.data(), {e}, i64).clone();
  b.edge_index = torch::stack({s, d});
  b.node_graph = torch::from_blob(ng.data(), {n}, i64).clone();
  b.edge_graph = torch::from_blob(eg.data(), {e}, i64).clone();
  return b;
}

GraphNetImpl::GraphNetImpl(int node_features, int edge_features, int global_features, GnnOptions options)
    : o_(options) {
  if (o_.hidden < 1 || o_.steps < 1) Fail("GNN: hidden and steps must be >= 1");
  const int h = o_.hidden;
  node_in_ = register_module("node_in", nn::Linear(node_features, h));
  edge_in_ = register_module("edge_in", nn::Linear(edge_features, h));
  global_in_ = register_module("global_in", nn::Linear(global_features, h));
  for (int s = 0; s < o_.steps; ++s) {
    edge_mlp_->push_back(Mlp(4 * h, h, h));  // [edge, source, destination, global]
    query_->push_back(nn::Linear(h, h));
    key_->push_back(nn::Linear(2 * h, h));  // [source, edge]
    value_->push_back(nn::Linear(2 * h, h));
    // No bias: a constant added to every score of a destination cancels in
    // its softmax, so a bias would be a parameter that never learns.
    attention_->push_back(nn::Linear(nn::LinearOptions(h, 1).bias(false)));
    node_mlp_->push_back(Mlp(3 * h, h, h));    // [node, messages, global]
    global_mlp_->push_back(Mlp(3 * h, h, h));  // [global, mean node, mean edge]
  }
  register_module("edge_mlp", edge_mlp_);
  register_module("query", query_);
  register_module("key", key_);
  register_module("value", value_);
  register_module("attention", attention_);
  register_module("node_mlp", node_mlp_);
  register_module("global_mlp", global_mlp_);
}

GraphNetImpl::Output GraphNetImpl::forward(const GraphBatch& b) {
  const int64_t n = b.x.size(0), graphs = b.num_graphs;
  torch::Tensor h = torch::relu(node_in_(b.x));
  torch::Tensor e = torch::relu(edge_in_(b.edge_attr));
  torch::Tensor u = torch::relu(global_in_(b.global));
  torch::Tensor src = b.edge_index[0], dst = b.edge_index[1];
  const double scale = 1.0 / std::sqrt(static_cast<double>(o_.hidden));
  for (int s = 0; s < o_.steps; ++s) {
    torch::Tensor hs = h.index_select(0, src), hd = h.index_select(0, dst);
    // Edge update.
    e = e + edge_mlp_[s]->as<nn::Sequential>()->forward(torch::cat({e, hs, hd, u.index_select(0, b.edge_graph)}, 1));
    // Graph attention: each destination attends over its incoming edges.
    torch::Tensor kv_in = torch::cat({hs, e}, 1);
    torch::Tensor q = query_[s]->as<nn::Linear>()->forward(hd);
    torch::Tensor k = key_[s]->as<nn::Linear>()->forward(kv_in);
    torch::Tensor score = attention_[s]->as<nn::Linear>()->forward(torch::tanh(q + k)).squeeze(1) * scale;
    torch::Tensor alpha = SegmentSoftmax(score, dst, n);
    torch::Tensor msg = SegmentSum(value_[s]->as<nn::Linear>()->forward(kv_in) * alpha.unsqueeze(1), dst, n);
    // Node update.
    h = h + node_mlp_[s]->as<nn::Sequential>()->forward(torch::cat({h, msg, u.index_select(0, b.node_graph)}, 1));
    // Global update.
    torch::Tensor mean_h = SegmentMean(h, b.node_graph, graphs);
    torch::Tensor mean_e = b.edge_graph.numel() > 0 ? SegmentMean(e, b.edge_graph, graphs) : torch::zeros_like(u);
    u = u + global_mlp_[s]->as<nn::Sequential>()->forward(torch::cat({u, mean_h, mean_e}, 1));
  }
  return {h, u};
}

PolicyImpl::PolicyImpl(int rule_actions, GnnOptions options) : rule_actions_(rule_actions), hidden_(options.hidden) {
  if (rule_actions < 1) Fail("policy: rule_actions must be >= 1");
  const int h = options.hidden;
  gnn_ = register_module("gnn", GraphNet(NodeFeatureSize(), kEdgeFeatureSize, kGlobalFeatureSize, options));
  rule_embedding_ = register_module("rule_embedding", nn::Embedding(rule_actions, h));
  score_ = register_module("score", Mlp(3 * h, h, 1));
  stop_ = register_module("stop", Mlp(h, h, 1));
  value_ = register_module("value", Mlp(h, h, 1));
  OrthogonalInit(*this);
  // Small output layers: near-uniform first policy, value near 0 (CleanRL).
  for (nn::Sequential* head : {&score_, &stop_}) {
    auto last = (*head)->ptr(2)->as<nn::Linear>();
    torch::NoGradGuard no_grad;
    torch::nn::init::orthogonal_(last->weight, 0.01);
  }
  {
    auto last = value_->ptr(2)->as<nn::Linear>();
    torch::NoGradGuard no_grad;
    torch::nn::init::orthogonal_(last->weight, 1.0);
  }
}

torch::Tensor PolicyImpl::Embed(const std::vector<const Observation*>& observations) {
  return gnn_->forward(MakeBatch(observations)).global;
}

PolicyImpl::Output PolicyImpl::forward(const std::vector<const Observation*>& observations) {
  GraphBatch b = MakeBatch(observations);
  GraphNet::Impl::Output g = gnn_->forward(b);
  const int64_t graphs = b.num_graphs;
  int64_t actions = 1;
  std::vector<int64_t> cand_graph, cand_rule, node_index, node_cand;
  std::vector<int64_t> slot;  // flat position of each candidate in [B, A]
  for (const Observation* o : observations) actions = std::max<int64_t>(actions, o->stop_action() + 1);
  int64_t c = 0;
  for (int64_t k = 0; k < graphs; ++k) {
    const Observation& o = *observations[k];
    for (int i = 0; i < o.stop_action(); ++i) {
      const EnvCandidate& cand = o.candidates[i];
      int rule_action = cand.rule_action;
      if (!from_database_.empty()) {
        if (rule_action < 0 || rule_action >= static_cast<int>(from_database_.size()))
          Fail("policy: rule action ", rule_action, " outside the database's ", from_database_.size());
        rule_action = from_database_[rule_action];
        if (rule_action < 0) continue;  // a rule the policy was not trained on: not one of its actions
      }
      if (rule_action < 0 || rule_action >= rule_actions_)
        Fail("policy: rule action ", rule_action, " outside the policy's ", rule_actions_,
             " (trained on another rule database?)");
      cand_graph.push_back(k);
      cand_rule.push_back(rule_action);
      slot.push_back(k * actions + i);
      for (NodeId n : cand.nodes) {
        node_index.push_back(b.node_offset[k] + n);
        node_cand.push_back(c);
      }
      ++c;
    }
  }
  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  auto tensor = [&](std::vector<int64_t>& v) {
    return torch::from_blob(v.data(), {static_cast<int64_t>(v.size())}, i64).clone();
  };
  torch::Tensor flat = torch::full({graphs * actions}, 0.0, g.global.options());
  torch::Tensor mask = torch::zeros({graphs * actions}, torch::TensorOptions().dtype(torch::kBool));
  if (c > 0) {
    torch::Tensor ni = tensor(node_index), nc = tensor(node_cand), cg = tensor(cand_graph), cr = tensor(cand_rule);
    torch::Tensor sum =
        torch::zeros({c, g.nodes.size(1)}, g.nodes.options()).index_add_(0, nc, g.nodes.index_select(0, ni));
    torch::Tensor count =
        torch::zeros({c}, g.nodes.options()).index_add_(0, nc, torch::ones({ni.size(0)}, g.nodes.options()));
    torch::Tensor matched = sum / count.clamp_min(1).unsqueeze(1);
    torch::Tensor feats = torch::cat({matched, rule_embedding_(cr), g.global.index_select(0, cg)}, 1);
    torch::Tensor scores = score_->forward(feats).squeeze(1);
    torch::Tensor sl = tensor(slot);
    flat = flat.scatter(0, sl, scores);
    mask.index_fill_(0, sl, true);
  }
  // Stop: the last valid slot of each observation.
  std::vector<int64_t> stop_slot;
  for (int64_t k = 0; k < graphs; ++k) stop_slot.push_back(k * actions + observations[k]->stop_action());
  torch::Tensor ss = tensor(stop_slot);
  flat = flat.scatter(0, ss, stop_->forward(g.global).squeeze(1));
  mask.index_fill_(0, ss, true);
  return {flat.view({graphs, actions}), mask.view({graphs, actions}), value_->forward(g.global).squeeze(1)};
}

void PolicyImpl::SetRuleIds(std::vector<std::string> ids) {
  if (static_cast<int>(ids.size()) * 2 != rule_actions_)
    Fail("policy: ", ids.size(), " rule ids for ", rule_actions_ / 2, " rules");
  rule_ids_ = std::move(ids);
  from_database_.clear();
}

int PolicyImpl::MapOnto(const std::vector<std::string>& database_ids) {
  if (rule_ids_.empty()) Fail("policy: no rule ids to map by");
  from_database_.clear();
  if (database_ids == rule_ids_) return static_cast<int>(rule_ids_.size());
  const std::vector<int> own = IndexByRuleId(database_ids, rule_ids_);
  from_database_.assign(2 * database_ids.size(), -1);
  int known = 0;
  for (size_t j = 0; j < own.size(); ++j) {
    if (own[j] < 0) continue;
    ++known;
    from_database_[2 * j] = 2 * own[j];
    from_database_[2 * j + 1] = 2 * own[j] + 1;
  }
  return known;
}

std::vector<std::string> RuleIds(const std::vector<rules::Rule>& rules) {
  std::vector<std::string> ids;
  ids.reserve(rules.size());
  for (const auto& r : rules) ids.push_back(r.id());
  return ids;
}

std::string RuleDatabaseId(const std::vector<std::string>& ids) {
  uint64_t h = 1469598103934665603ull;
  for (const std::string& id : ids)
    for (char c : id + "\n") h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu rules, ids %016llx", ids.size(), static_cast<unsigned long long>(h));
  return buf;
}

std::vector<int> IndexByRuleId(const std::vector<std::string>& ids, const std::vector<std::string>& in) {
  std::unordered_map<std::string, int> where;
  for (size_t k = 0; k < in.size(); ++k) where.emplace(in[k], static_cast<int>(k));
  std::vector<int> out;
  out.reserve(ids.size());
  for (const std::string& id : ids) {
    auto it = where.find(id);
    out.push_back(it == where.end() ? -1 : it->second);
  }
  return out;
}

void SavePolicy(PolicyImpl& policy, const std::string& path) {
  torch::serialize::OutputArchive a;
  policy.save(a);
  if (!policy.rule_ids().empty()) a.write("rule_ids", RuleIdsToTensor(policy.rule_ids()));
  SaveArchiveAtomically(a, path);
}

Policy LoadPolicy(const std::string& path, const std::vector<std::string>& database_ids) {
  const int rule_actions = 2 * static_cast<int>(database_ids.size());
  torch::serialize::InputArchive a;
  try {
    a.load_from(path);
  } catch (const std::exception& e) {
    Fail("cannot load the agent '", path, "' (missing or not a saved policy)");
  }
  try {
    torch::serialize::InputArchive emb, gnn, query;
    torch::Tensor w;
    if (!a.try_read("rule_embedding", emb) || !emb.try_read("weight", w) || w.dim() != 2)
      Fail("the agent '", path, "' holds no policy");
    torch::Tensor ids;
    const bool has_ids = a.try_read("rule_ids", ids);
    if (has_ids && (ids.dim() != 1 || 2 * ids.size(0) != w.size(0)))
      Fail("the agent '", path, "' is corrupt: ", ids.numel(), " rule ids for ", w.size(0) / 2, " rules");
    if (!has_ids && w.size(0) != rule_actions)
      Fail("the agent '", path, "' was trained with ", w.size(0) / 2, " rules, the rule database has ",
           rule_actions / 2,
           " (the agent does not record which, so it cannot act on another database): train it on "
           "this database");
    GnnOptions o;
    o.hidden = static_cast<int>(w.size(1));
    o.steps = 0;
    if (a.try_read("gnn", gnn) && gnn.try_read("query", query)) {
      torch::serialize::InputArchive step;
      while (query.try_read(std::to_string(o.steps), step)) ++o.steps;
    }
    if (o.steps < 1) Fail("the agent '", path, "' holds no GNN");
    Policy policy(static_cast<int>(w.size(0)), o);
    policy->load(a);
    policy->eval();
    if (has_ids) {
      policy->SetRuleIds(RuleIdsFromTensor(ids));
      if (policy->MapOnto(database_ids) == 0)
        Fail("the agent '", path, "' knows none of the rule database's ", database_ids.size(),
             " rules: train it on this database");
    }
    return policy;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();
    Fail("the agent '", path, "' is corrupt: ", what.substr(0, what.find('\n')));
  }
}

void OrthogonalInit(torch::nn::Module& module, double gain) {
  torch::NoGradGuard no_grad;
  for (auto& m : module.modules(/*include_self=*/false)) {
    if (auto* linear = m->as<nn::Linear>()) {
      torch::nn::init::orthogonal_(linear->weight, gain);
      if (linear->bias.defined()) linear->bias.zero_();
    }
  }
}

}  // namespace rlflow::agents

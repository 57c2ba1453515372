#pragma once
// The graph neural network of the model-free agent (X-RLflow's layers): an
// encoder, `steps` rounds of edge update -> graph-attention message passing
// -> node update -> global update, all written with index / scatter ops so
// that a batch of graphs runs as one disjoint graph. Node order does not
// matter: permuting a graph's nodes permutes its node embeddings and leaves
// its global embedding unchanged (gnn_test).
//
// The policy scores each candidate rewrite from the embeddings of the nodes
// it rewrites (their mean), a learned embedding of its rule action (rule x
// direction) and the graph's global embedding, so one GNN pass per step
// scores every candidate; the stop action and the value are read from the
// global embedding. (X-RLflow instead embeds every successor graph: one GNN
// pass per candidate, up to 500 per step.)
#include <cstdint>
#include <string>
#include <vector>

#include "agents/env.h"
#include "core/rules/rule.h"
#include "third_party/torch_nn.h"

namespace rlflow::agents {

// Observations as one disjoint graph.
struct GraphBatch {
  torch::Tensor x;           // [N, node features]
  torch::Tensor edge_index;  // [2, E] int64: source, destination (batch node ids)
  torch::Tensor edge_attr;   // [E, edge features]
  torch::Tensor global;      // [B, global features]
  torch::Tensor node_graph;  // [N] int64: the graph of each node
  torch::Tensor edge_graph;  // [E] int64
  int64_t num_graphs = 0;
  std::vector<int64_t> node_offset;  // per graph: its first node's batch id
};
GraphBatch MakeBatch(const std::vector<const Observation*>& observations);

struct GnnOptions {
  int hidden = 64;
  int steps = 5;
};

class GraphNetImpl : public torch::nn::Module {
 public:
  GraphNetImpl(int node_features, int edge_features, int global_features, GnnOptions options = {});
  struct Output {
    torch::Tensor nodes;   // [N, hidden]
    torch::Tensor global;  // [B, hidden]
  };
  Output forward(const GraphBatch& batch);

 private:
  GnnOptions o_;
  torch::nn::Linear node_in_{nullptr}, edge_in_{nullptr}, global_in_{nullptr};
  torch::nn::ModuleList edge_mlp_, query_, key_, value_, attention_, node_mlp_, global_mlp_;
};
TORCH_MODULE(GraphNet);

// Policy and value over the environment's actions (candidates + stop).
class PolicyImpl : public torch::nn::Module {
 public:
  PolicyImpl(int rule_actions, GnnOptions options = {});
  struct Output {
    torch::Tensor logits;  // [B, A]: per observation its candidates, then stop; padded
    torch::Tensor mask;    // [B, A] bool: true for the observation's valid actions
    torch::Tensor value;   // [B]
  };
  Output forward(const std::vector<const Observation*>& observations);
  // The GNN's global embedding of each observation, [B, hidden]: the graph
  // as the policy sees it (the world model's latent, world_model/encoder.h).
  torch::Tensor Embed(const std::vector<const Observation*>& observations);
  int rule_actions() const { return rule_actions_; }
  int hidden() const { return hidden_; }
  // The ids of the rules the policy's actions are (rule k: actions 2k and
  // 2k + 1), saved with it; empty for an agent saved before they were (it
  // acts on a database of exactly its number of rules, by position).
  const std::vector<std::string>& rule_ids() const { return rule_ids_; }
  void SetRuleIds(std::vector<std::string> ids);
  // Acts on a rule database by rule id (a database regenerated or grown
  // since training): a candidate of a rule the policy was not trained on
  // is never one of its valid actions. Needs rule_ids(). Returns how many
  // of the database's rules the policy knows.
  int MapOnto(const std::vector<std::string>& database_ids);

 private:
  int rule_actions_, hidden_;
  std::vector<std::string> rule_ids_;
  std::vector<int> from_database_;  // database rule action -> the policy's (-1: unknown); empty: the same
  GraphNet gnn_{nullptr};
  torch::nn::Embedding rule_embedding_{nullptr};
  torch::nn::Sequential score_{nullptr}, stop_{nullptr}, value_{nullptr};
};
TORCH_MODULE(Policy);

// Saves the policy's weights alone (atomically: temp file + rename).
void SavePolicy(PolicyImpl& policy, const std::string& path);
// Loads a policy saved by SavePolicy or a training checkpoint; its sizes
// (hidden, message-passing steps) are read from the file. It acts on the
// rule database whose rule ids are `database_ids` (in order): by rule id
// when the file records its rules (PolicyImpl::MapOnto), else by position.
// Throws rlflow::Error if the file is missing or corrupt, if it records no
// rules and was trained on another number of rules, or if it knows none of
// the database's.
Policy LoadPolicy(const std::string& path, const std::vector<std::string>& database_ids);
// The ids of a rule list, in order (a Matcher's rules(), a database's).
std::vector<std::string> RuleIds(const std::vector<rules::Rule>& rules);
// A rule database's identity: its rule count and an FNV-1a hash of its rule
// ids in order ("3668 rules, ids 0123456789abcdef"): rollouts' headers and
// training configurations record it, so that a database changed since
// (grown, regenerated) is noticed.
std::string RuleDatabaseId(const std::vector<std::string>& ids);
// For each id of `ids`, its index in `in` (-1 where `in` lacks it): how a
// trained agent's rules and a database's correspond.
std::vector<int> IndexByRuleId(const std::vector<std::string>& ids, const std::vector<std::string>& in);

// Orthogonal initialisation (gain sqrt(2) for hidden layers), zero biases.
void OrthogonalInit(torch::nn::Module& module, double gain = 1.4142135623730951);

}  // namespace rlflow::agents

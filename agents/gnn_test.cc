// The GNN and the policy: node order does not matter (a permuted graph gives
// permuted node embeddings, the same global embedding and the same action
// scores), a batch equals its graphs run alone, masks cover exactly the
// valid actions, and gradients reach every parameter.
#include "agents/gnn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>

#include "core/error.h"
#include "core/graph_builder.h"
#include "rules/testing.h"
#include "runtime/table_cost_testing.h"

namespace rlflow::agents {
namespace {

Graph Model(int blocks) {
  GraphBuilder b(7);
  ValueId x = b.Input("x", {1, 4, 6, 6});
  int64_t c = 4;
  for (int k = 0; k < blocks; ++k) {
    std::string n = "b" + std::to_string(k);
    ValueId w = b.Weight(n + "_w", {8, c, 1, 1}, 0.5f);
    ValueId s = b.Weight(n + "_s", {8, 1, 1}, 0.5f, 1.0f);
    ValueId t = b.Weight(n + "_t", {8, 1, 1}, 0.5f);
    ValueId y = b.Op("Relu", {b.Op("Add", {b.Op("Mul", {b.Op("Conv", {x, w}), s}), t})});
    // Residual: a node with two incoming edges from different ops (from two
    // identical ops the attention could not tell the edges apart).
    x = c == 8 ? b.Op("Add", {x, b.Op("Sigmoid", {y})}) : y;
    c = 8;
  }
  return b.Build({x});
}

struct Fixture {
  Matcher matcher{testing::AllRules()};
  testing::TableCost cost{0.0};
  int rule_actions() const { return 2 * static_cast<int>(matcher.rules().size()); }
  std::vector<std::string> ids() const { return RuleIds(matcher.rules()); }
};
Fixture& F() {
  static Fixture* f = new Fixture();
  return *f;
}

Observation Observe(int blocks) {
  RewriteEnv env(&F().matcher, &F().cost);
  return env.Reset(Model(blocks));
}

// The same observation with its nodes in the order `perm` (new row i is old node perm[i]).
Observation Permute(const Observation& o, const std::vector<int>& perm) {
  Observation p = o;
  std::vector<int> where(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) where[perm[i]] = static_cast<int>(i);
  const int nf = NodeFeatureSize();
  for (size_t i = 0; i < perm.size(); ++i) {
    std::copy_n(&o.node_features[static_cast<size_t>(perm[i]) * nf], nf, &p.node_features[i * nf]);
    p.node_op[i] = o.node_op[perm[i]];
  }
  for (int e = 0; e < o.num_edges; ++e) {
    p.edge_src[e] = where[o.edge_src[e]];
    p.edge_dst[e] = where[o.edge_dst[e]];
  }
  for (EnvCandidate& c : p.candidates)
    for (NodeId& n : c.nodes) n = where[n];
  return p;
}

TEST(Gnn, NodeOrderDoesNotMatter) {
  torch::manual_seed(3);
  Observation o = Observe(3);
  std::vector<int> perm(o.num_nodes);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(5));
  ASSERT_NE(perm, std::vector<int>(perm.size())) << "a permutation that moves nodes";
  Observation p = Permute(o, perm);
  GraphNet net(NodeFeatureSize(), kEdgeFeatureSize, kGlobalFeatureSize);
  auto a = net->forward(MakeBatch({&o}));
  auto b = net->forward(MakeBatch({&p}));
  torch::Tensor index = torch::tensor(std::vector<int64_t>(perm.begin(), perm.end()));
  EXPECT_TRUE(torch::allclose(b.nodes, a.nodes.index_select(0, index), 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(b.global, a.global, 1e-4, 1e-5));
  // Not trivially so: nodes get different embeddings.
  EXPECT_GT((a.nodes[0] - a.nodes[1]).abs().max().item<float>(), 1e-4);
  Policy policy(F().rule_actions());
  auto pa = policy->forward({&o});
  auto pb = policy->forward({&p});
  EXPECT_TRUE(torch::allclose(pa.logits, pb.logits, 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(pa.value, pb.value, 1e-4, 1e-5));
}

TEST(Gnn, ABatchIsItsGraphsAlone) {
  torch::manual_seed(4);
  Observation small = Observe(1), large = Observe(3);
  Policy policy(F().rule_actions());
  auto both = policy->forward({&small, &large});
  auto s = policy->forward({&small});
  auto l = policy->forward({&large});
  const int64_t ns = small.stop_action() + 1, nl = large.stop_action() + 1;
  ASSERT_EQ(both.logits.size(1), std::max(ns, nl));
  EXPECT_TRUE(torch::allclose(both.logits[0].slice(0, 0, ns), s.logits[0], 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(both.logits[1].slice(0, 0, nl), l.logits[0], 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(both.value, torch::cat({s.value, l.value}), 1e-4, 1e-5));
  // Masks: exactly the candidates and stop.
  EXPECT_EQ(both.mask[0].sum().item<int64_t>(), ns);
  EXPECT_EQ(both.mask[1].sum().item<int64_t>(), nl);
  EXPECT_TRUE(both.mask[0][ns - 1].item<bool>());
  if (ns < both.logits.size(1)) {
    EXPECT_FALSE(both.mask[0][ns].item<bool>());
  }
}

TEST(Gnn, GradientsReachEveryParameter) {
  torch::manual_seed(5);
  Observation o = Observe(2);
  Policy policy(F().rule_actions());
  auto out = policy->forward({&o});
  torch::Tensor logp = torch::log_softmax(out.logits.masked_fill(out.mask.logical_not(), -1e8), 1);
  (logp[0][0] + out.value.sum()).backward();
  int with_grad = 0, params = 0;
  for (const auto& p : policy->named_parameters()) {
    ++params;
    if (p.value().grad().defined() && p.value().grad().abs().sum().item<double>() > 0)
      ++with_grad;
    else if (p.key().find("rule_embedding") == std::string::npos)
      ADD_FAILURE() << p.key() << " gets no gradient";
  }
  EXPECT_GT(with_grad, params / 2);
}

TEST(Gnn, SavedPoliciesLoadWithTheirSizes) {
  torch::manual_seed(6);
  Observation o = Observe(2);
  Policy policy(F().rule_actions(), GnnOptions{24, 3});
  std::string dir = ::testing::TempDir();
  std::string path = dir + "/policy.pt";
  SavePolicy(*policy, path);
  Policy loaded = LoadPolicy(path, F().ids());
  auto a = policy->forward({&o});
  auto b = loaded->forward({&o});
  EXPECT_TRUE(torch::allclose(a.logits, b.logits));
  EXPECT_TRUE(torch::allclose(a.value, b.value));
  // A policy that records no rule ids on another rule database, a missing
  // file, a file that is no policy.
  std::vector<std::string> more = F().ids();
  more.push_back("fffffffffff0");
  EXPECT_THROW(LoadPolicy(path, more), Error);
  EXPECT_THROW(LoadPolicy(dir + "/missing.pt", F().ids()), Error);
  {
    std::FILE* f = std::fopen((dir + "/garbage.pt").c_str(), "wb");
    std::fputs("not a policy", f);
    std::fclose(f);
  }
  EXPECT_THROW(LoadPolicy(dir + "/garbage.pt", F().ids()), Error);
}

// A policy saved with its rule ids acts on a rule database regenerated or
// grown since (a rule added before all of them shifts every position): its
// candidates are scored as before, by rule id, and a candidate of the new
// rule is never one of its actions. A database with none of its rules is
// refused.
TEST(Gnn, APolicyActsOnAGrownDatabaseByRuleId) {
  torch::manual_seed(8);
  Observation o = Observe(2);
  ASSERT_GT(o.stop_action(), 0);
  Policy policy(F().rule_actions(), GnnOptions{24, 3});
  policy->SetRuleIds(F().ids());
  const std::string path = ::testing::TempDir() + "/policy_with_ids.pt";
  SavePolicy(*policy, path);
  std::vector<std::string> grown = {"fffffffffff0"};
  for (const auto& id : F().ids()) grown.push_back(id);
  Policy loaded = LoadPolicy(path, grown);
  EXPECT_EQ(loaded->rule_ids(), F().ids());
  // The observation as the grown database numbers it, with one more
  // candidate: the new rule's, on the first candidate's nodes.
  Observation shifted = o;
  for (auto& c : shifted.candidates) c.rule_action += 2;
  EnvCandidate extra = o.candidates[0];
  extra.rule = 0;
  extra.rule_action = 0;
  shifted.candidates.push_back(extra);
  const int n = o.stop_action();
  PolicyImpl::Output a = policy->forward({&o}), b = loaded->forward({&shifted});
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(b.mask[0][i].item<bool>());
    EXPECT_FLOAT_EQ(b.logits[0][i].item<float>(), a.logits[0][i].item<float>()) << "candidate " << i;
  }
  EXPECT_FALSE(b.mask[0][n].item<bool>()) << "the new rule's candidate is one of the policy's actions";
  EXPECT_TRUE(b.mask[0][n + 1].item<bool>()) << "stop";
  EXPECT_FLOAT_EQ(b.logits[0][n + 1].item<float>(), a.logits[0][n].item<float>());
  // The same database: every candidate, nothing mapped.
  EXPECT_EQ(LoadPolicy(path, F().ids())->forward({&o}).mask.sum().item<int64_t>(), n + 1);
  // A database that shares no rule with it.
  EXPECT_THROW(LoadPolicy(path, {"fffffffffff0", "fffffffffff1"}), Error);
}

// Policies (like every archive: checkpoints, world models, controllers) are
// written atomically: a symlink to a policy stays a link and its target is
// replaced, a failed write is a one-line error naming the path, and no
// temporary file is left.
TEST(Gnn, PoliciesAreSavedAtomically) {
  namespace fs = std::filesystem;
  torch::manual_seed(7);
  Observation o = Observe(2);
  const fs::path dir = fs::path(::testing::TempDir()) / "atomic_policies";
  fs::remove_all(dir);
  fs::create_directories(dir);
  Policy first(F().rule_actions(), GnnOptions{24, 3}), second(F().rule_actions(), GnnOptions{24, 3});
  SavePolicy(*first, (dir / "agent.pt").string());
  fs::create_symlink("agent.pt", dir / "latest.pt");
  SavePolicy(*second, (dir / "latest.pt").string());
  EXPECT_TRUE(fs::is_symlink(dir / "latest.pt"));
  for (const char* name : {"latest.pt", "agent.pt"}) {
    Policy loaded = LoadPolicy((dir / name).string(), F().ids());
    EXPECT_TRUE(torch::allclose(loaded->forward({&o}).logits, second->forward({&o}).logits)) << name;
  }
  try {
    SavePolicy(*first, (dir / "missing" / "agent.pt").string());
    ADD_FAILURE() << "no error for a missing directory";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find((dir / "missing").string()), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  if (fs::exists("/dev/full")) {  // a device written in place, whose writes fail
    try {
      SavePolicy(*first, "/dev/full");
      ADD_FAILURE() << "no error writing to /dev/full";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("cannot write '/dev/full'"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    EXPECT_TRUE(fs::is_character_file("/dev/full"));
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"agent.pt", "latest.pt"}));
}

}  // namespace
}  // namespace rlflow::agents

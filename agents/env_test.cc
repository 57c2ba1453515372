// The rewrite environment on a small conv + batch-norm graph with a
// deterministic table cost model: observation layout, rewards (each kind
// against its definition, and the telescoping sum over an episode), invalid
// actions, stop / horizon / no-candidate ends, forks, the candidate cap and
// the hierarchical form.
#include "agents/env.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/op_registry.h"
#include "rules/testing.h"
#include "runtime/executor.h"
#include "runtime/table_cost_testing.h"

namespace rlflow::agents {
namespace {

// Two conv -> *S -> +T -> Relu blocks (batch norms in inference form), a
// parallel 3x3 conv of the input, and a Concat.
Graph Model() {
  GraphBuilder b(7);
  ValueId x = b.Input("x", {1, 4, 6, 6});
  auto block = [&](ValueId in, int64_t c_in, const std::string& n) {
    ValueId w = b.Weight(n + "_w", {8, c_in, 1, 1}, 0.5f);
    ValueId s = b.Weight(n + "_s", {8, 1, 1}, 0.5f, 1.0f);
    ValueId t = b.Weight(n + "_t", {8, 1, 1}, 0.5f);
    return b.Op("Relu", {b.Op("Add", {b.Op("Mul", {b.Op("Conv", {in, w}), s}), t})});
  };
  ValueId y = block(block(x, 4, "a"), 8, "b");
  ValueId z = b.Op("Conv", {x, b.Weight("w3", {8, 4, 3, 3}, 0.5f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  return b.Build({b.Op("Concat", {y, z}, {{"axis", Attribute::Int(1)}})});
}

struct Fixture {
  Matcher matcher{testing::AllRules()};
  testing::TableCost cost;
};

Fixture& F() {
  static Fixture* f = new Fixture();
  return *f;
}

// The candidate with the largest estimated gain.
int Best(const Observation& o) {
  int best = 0;
  for (int i = 1; i < static_cast<int>(o.candidates.size()); ++i)
    if (o.candidates[i].estimated_gain > o.candidates[best].estimated_gain) best = i;
  return best;
}

TEST(RewriteEnv, ObservationLayout) {
  RewriteEnv env(&F().matcher, &F().cost);
  Graph g = Model();
  const Observation& o = env.Reset(g);
  EXPECT_EQ(o.num_nodes, g.num_nodes());  // nothing is weight-only here
  EXPECT_EQ(o.node_features.size(), static_cast<size_t>(o.num_nodes * NodeFeatureSize()));
  EXPECT_EQ(o.node_op.size(), static_cast<size_t>(o.num_nodes));
  EXPECT_EQ(o.edge_src.size(), static_cast<size_t>(o.num_edges));
  EXPECT_EQ(o.edge_features.size(), static_cast<size_t>(o.num_edges * kEdgeFeatureSize));
  EXPECT_EQ(o.global_features.size(), static_cast<size_t>(kGlobalFeatureSize));
  EXPECT_FLOAT_EQ(o.global_features[0], 1.0f);  // cost / initial cost
  EXPECT_FLOAT_EQ(o.global_features[1], 0.0f);  // step / horizon
  // Node-to-node edges: every input produced by another node (x and weights are not nodes).
  int edges = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    for (ValueId v : g.node(id).inputs) edges += g.value(v).producer != kNoNode;
  EXPECT_EQ(o.num_edges, edges);
  // One-hot op type: exactly one of the vocabulary entries per node, and the right one.
  const std::vector<std::string>& vocab = OpVocabulary();
  EXPECT_EQ(vocab.back(), "opaque");
  // Frozen with the checked-in agents (61 operators): sorted, every entry
  // still a registry operator.
  EXPECT_EQ(vocab.size(), 62u);
  EXPECT_TRUE(std::is_sorted(vocab.begin(), vocab.end() - 1));
  for (size_t k = 0; k + 1 < vocab.size(); ++k)
    EXPECT_NE(OpRegistry::Global().Find("", vocab[k]), nullptr) << vocab[k] << " is no longer a registry operator";
  for (int n = 0; n < o.num_nodes; ++n) {
    float sum = 0;
    for (size_t k = 0; k < vocab.size(); ++k) sum += o.node_features[n * NodeFeatureSize() + k];
    EXPECT_FLOAT_EQ(sum, 1.0f);
    EXPECT_EQ(vocab[o.node_op[n]], g.node(n).op);
    EXPECT_EQ(o.node_features[n * NodeFeatureSize() + o.node_op[n]], 1.0f);
  }
  // Candidates, and the hierarchical form pointing at them.
  ASSERT_FALSE(o.candidates.empty());
  EXPECT_EQ(o.candidates_total, static_cast<int>(o.candidates.size()));
  EXPECT_EQ(o.rule_mask.size(), 2 * F().matcher.rules().size());
  int located = 0;
  for (size_t a = 0; a < o.locations.size(); ++a) {
    EXPECT_EQ(o.rule_mask[a] != 0, !o.locations[a].empty()) << a;
    for (int32_t c : o.locations[a]) {
      EXPECT_EQ(o.candidates[c].rule_action, static_cast<int>(a));
      ++located;
    }
  }
  EXPECT_EQ(located, static_cast<int>(o.candidates.size()));
  for (const EnvCandidate& c : o.candidates) {
    EXPECT_EQ(c.rule_action, 2 * c.rule + (c.reverse ? 1 : 0));
    ASSERT_FALSE(c.nodes.empty());
    for (NodeId n : c.nodes) EXPECT_LT(n, o.num_nodes);
  }
  EXPECT_EQ(env.FlatAction(o.candidates[0].rule_action, 0), 0);
  EXPECT_EQ(env.FlatAction(-1, 0), -1);
}

// The candidates are the engine's (every match of the matcher that changes
// what runs and has a valid replacement), in the matcher's order.
TEST(RewriteEnv, CandidatesAreTheMatchersMatches) {
  RewriteEnv env(&F().matcher, &F().cost);
  Graph g = Model();
  const Observation& o = env.Reset(g);
  std::vector<Match> matches = F().matcher.FindAll(g);
  EngineOptions eo;
  eo.matcher = &F().matcher;
  eo.cost = &F().cost;
  eo.max_nodes = 2 * g.num_nodes();
  RewriteEngine engine(eo);
  std::vector<Candidate> costed = engine.Start(g).Candidates();
  ASSERT_EQ(o.candidates.size(), costed.size());
  size_t from = 0;
  for (size_t i = 0; i < costed.size(); ++i) {
    const EnvCandidate& c = o.candidates[i];
    EXPECT_EQ(c.rule, costed[i].match.rule);
    EXPECT_EQ(c.reverse, costed[i].match.reverse);
    EXPECT_EQ(c.nodes, costed[i].match.nodes);  // no weight-only nodes here: same ids
    // ... and a match of the matcher, in its order.
    bool found = false;
    for (; from < matches.size() && !found; ++from)
      found = matches[from].rule == c.rule && matches[from].reverse == c.reverse && matches[from].nodes == c.nodes;
    EXPECT_TRUE(found) << i;
  }
  EXPECT_GT(matches.size(), 0u);
}

TEST(RewriteEnv, RewardsFollowTheirDefinitions) {
  Graph g = Model();
  for (RewardKind kind : {RewardKind::kDelta, RewardKind::kNormalised, RewardKind::kCombined}) {
    EnvOptions opt;
    opt.reward = kind;
    RewriteEnv env(&F().matcher, &F().cost, opt);
    const Observation& o = env.Reset(g);
    const double c0 = env.initial_cost();
    double ma0 = 0;
    for (NodeId id = 0; id < g.num_nodes(); ++id) ma0 += StaticNodeCost(g, id).bytes;
    int a = Best(o);
    double gain = o.candidates[a].estimated_gain;
    ASSERT_GT(gain, 0);
    StepResult r = env.Step(a);
    ASSERT_TRUE(r.info.valid) << r.info.message;
    EXPECT_FALSE(r.done);
    const Graph& h = env.graph();
    double c1 = F().cost.GraphCost(h), ma1 = 0;
    std::vector<char> wo = WeightOnlyNodes(h);
    for (NodeId id = 0; id < h.num_nodes(); ++id)
      if (!wo[id]) ma1 += StaticNodeCost(h, id).bytes;
    EXPECT_DOUBLE_EQ(r.info.cost_ms, c1);
    double want = kind == RewardKind::kDelta        ? c0 - c1
                  : kind == RewardKind::kNormalised ? 100 * (c0 - c1) / c0
                                                    : 100 * (0.8 * (c0 - c1) / c0 + 0.2 * (ma0 - ma1) / ma0);
    EXPECT_NEAR(r.reward, want, 1e-9) << RewardKindName(kind);
    EXPECT_EQ(ParseRewardKind(RewardKindName(kind)), kind);
  }
  EXPECT_THROW(ParseRewardKind("speed"), Error);
}

TEST(RewriteEnv, NormalisedRewardsSumToTheEpisodesGain) {
  RewriteEnv env(&F().matcher, &F().cost);
  Graph g = Model();
  env.Reset(g);
  double sum = 0;
  int steps = 0;
  for (; !env.done() && steps < 20; ++steps) {
    const Observation& o = env.observation();
    int a = o.candidates.empty() ? o.stop_action() : Best(o);
    if (!o.candidates.empty() && o.candidates[a].estimated_gain <= 0) a = o.stop_action();
    StepResult r = env.Step(a);
    ASSERT_TRUE(r.info.valid) << r.info.message;
    sum += r.reward;
  }
  EXPECT_TRUE(env.done());
  EXPECT_GE(steps, 3);  // two scale folds, two shift folds at least
  EXPECT_NEAR(sum, 100 * (env.initial_cost() - F().cost.GraphCost(env.graph())) / env.initial_cost(), 1e-9);
  EXPECT_GT(sum, 0);
  // The result computes what the original does.
  std::vector<at::Tensor> in = RandomInputs(g, 3);
  EXPECT_LT(RelativeError(Executor(env.graph()).Run(in)[0], Executor(g).Run(in)[0]), 1e-5);
}

TEST(RewriteEnv, InvalidActionsArePenalisedAndChangeNothing) {
  RewriteEnv env(&F().matcher, &F().cost);
  Graph g = Model();
  env.Reset(g);
  uint64_t hash = env.graph().StructuralHash();
  size_t n = env.observation().candidates.size();
  for (int bad : {-1, static_cast<int>(n) + 1, 1 << 30}) {
    StepResult r = env.Step(bad);
    EXPECT_FALSE(r.info.valid);
    EXPECT_DOUBLE_EQ(r.reward, -100);
    EXPECT_NE(r.info.message.find("out of range"), std::string::npos) << r.info.message;
    EXPECT_EQ(env.graph().StructuralHash(), hash);
    EXPECT_EQ(env.observation().candidates.size(), n);
    EXPECT_FALSE(r.done);
  }
  EXPECT_EQ(env.steps(), 3);  // invalid steps count towards the horizon
  // Stop ends the episode; a step after the end is invalid.
  StepResult stop = env.Step(static_cast<int>(n));
  EXPECT_TRUE(stop.done);
  EXPECT_TRUE(stop.info.valid);
  EXPECT_EQ(stop.info.stop, StopReason::kStopAction);
  EXPECT_DOUBLE_EQ(stop.reward, 0);
  StepResult after = env.Step(0);
  EXPECT_FALSE(after.info.valid);
  EXPECT_TRUE(after.done);
  // No episode at all.
  RewriteEnv fresh(&F().matcher, &F().cost);
  EXPECT_FALSE(fresh.Step(0).info.valid);
}

TEST(RewriteEnv, HorizonEndsTheEpisode) {
  EnvOptions opt;
  opt.horizon = 2;
  RewriteEnv env(&F().matcher, &F().cost, opt);
  env.Reset(Model());
  StepResult r1 = env.Step(Best(env.observation()));
  EXPECT_FALSE(r1.done);
  EXPECT_FLOAT_EQ(r1.observation->global_features[1], 0.5f);
  StepResult r2 = env.Step(Best(env.observation()));
  EXPECT_TRUE(r2.done);
  EXPECT_EQ(r2.info.stop, StopReason::kHorizon);
}

TEST(RewriteEnv, ForksAreIndependentAndDeterministic) {
  RewriteEnv env(&F().matcher, &F().cost);
  env.Reset(Model());
  env.Step(Best(env.observation()));
  RewriteEnv fork = env.Fork();
  uint64_t hash = env.graph().StructuralHash();
  std::vector<float> features = env.observation().node_features;
  int a = Best(fork.observation());
  StepResult rf = fork.Step(a);
  ASSERT_TRUE(rf.info.valid);
  EXPECT_NE(fork.graph().StructuralHash(), hash);
  // The original did not move...
  EXPECT_EQ(env.graph().StructuralHash(), hash);
  EXPECT_EQ(env.observation().node_features, features);
  EXPECT_EQ(env.steps(), 1);
  // ... and the same action on it gives the same step.
  StepResult re = env.Step(a);
  EXPECT_EQ(env.graph().StructuralHash(), fork.graph().StructuralHash());
  EXPECT_DOUBLE_EQ(re.reward, rf.reward);
  EXPECT_EQ(env.observation().node_features, fork.observation().node_features);
  EXPECT_EQ(env.observation().edge_src, fork.observation().edge_src);
  EXPECT_EQ(env.observation().candidates.size(), fork.observation().candidates.size());
  // Real work is counted for the environment and its forks together: three
  // steps (two on it, one on the fork), no measurement (a table cost).
  EXPECT_EQ(env.real_steps(), 3);
  EXPECT_EQ(fork.real_steps(), 3);
  EXPECT_EQ(env.real_measurements(), 0);
  RewriteEnv other(&F().matcher, &F().cost);
  EXPECT_EQ(other.real_steps(), 0);  // another environment counts its own
}

TEST(RewriteEnv, CandidateCapKeepsTheCheapest) {
  RewriteEnv all(&F().matcher, &F().cost);
  const Observation& full = all.Reset(Model());
  ASSERT_GT(full.candidates.size(), 3u);
  EnvOptions opt;
  opt.max_candidates = 3;
  opt.max_locations = 1;
  RewriteEnv capped(&F().matcher, &F().cost, opt);
  const Observation& o = capped.Reset(Model());
  EXPECT_EQ(o.candidates.size(), 3u);
  EXPECT_EQ(o.candidates_total, static_cast<int>(full.candidates.size()));
  std::vector<double> gains;
  for (const EnvCandidate& c : full.candidates) gains.push_back(c.estimated_gain);
  std::sort(gains.rbegin(), gains.rend());
  for (const EnvCandidate& c : o.candidates) EXPECT_GE(c.estimated_gain, gains[2]);
  for (const auto& l : o.locations) EXPECT_LE(l.size(), 1u);
}

TEST(RewriteEnv, EndToEndRewardMeasures) {
  std::unique_ptr<TimingBackend> backend = MakeTimingBackend("cpu");
  EnvOptions opt;
  opt.reward = RewardKind::kEndToEnd;
  opt.measure_every = 2;
  opt.measure_samples = 3;
  EXPECT_THROW(RewriteEnv(&F().matcher, &F().cost, opt), Error);  // no backend
  RewriteEnv env(&F().matcher, &F().cost, opt, backend.get());
  env.Reset(Model());
  StepResult r1 = env.Step(Best(env.observation()));
  EXPECT_DOUBLE_EQ(r1.reward, 0);  // between measurements
  double first = r1.info.measured_ms;
  EXPECT_GT(first, 0);
  StepResult r2 = env.Step(Best(env.observation()));
  EXPECT_TRUE(std::isfinite(r2.reward));
  EXPECT_GT(r2.info.measured_ms, 0);
  EXPECT_NE(r2.info.measured_ms, first);  // measured again
  // Measured at the reset and after the second step; two real steps.
  EXPECT_EQ(env.real_measurements(), 2);
  EXPECT_EQ(env.real_steps(), 2);
}

TEST(RewriteEnv, BadOptions) {
  EnvOptions opt;
  opt.horizon = 0;
  EXPECT_THROW(RewriteEnv(&F().matcher, &F().cost, opt), Error);
  opt = {};
  opt.max_candidates = 0;
  EXPECT_THROW(RewriteEnv(&F().matcher, &F().cost, opt), Error);
  EXPECT_THROW(RewriteEnv(nullptr, &F().cost), Error);
  EXPECT_THROW(RewriteEnv(&F().matcher, nullptr), Error);
}

}  // namespace
}  // namespace rlflow::agents
